package target

import (
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

func TestConfigValidate(t *testing.T) {
	d, _ := blockdev.NewMem(1<<20, 4096)
	good := func() Config {
		return Config{
			Subsystems: []SubsystemConfig{{NQN: "nqn.a", Namespaces: []NamespaceConfig{{NSID: 1, Device: d}}}},
			Listeners:  []ListenerConfig{{Address: "127.0.0.1:0"}},
		}
	}
	c := good()
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	if c.QueueSize != 128 || c.InCapsuleDataSize != 128<<10 || c.Subsystems[0].Model != "nvstripe" || len(c.Subsystems[0].Serial) != 20 {
		t.Fatalf("defaults %+v", c)
	}
	bad := map[string]func(*Config){
		"no subsystems": func(c *Config) { c.Subsystems = nil },
		"no listeners":  func(c *Config) { c.Listeners = nil },
		"discovery nqn": func(c *Config) { c.Subsystems[0].NQN = pdu.DiscoveryNQN },
		"duplicate nsid": func(c *Config) {
			c.Subsystems[0].Namespaces = append(c.Subsystems[0].Namespaces, c.Subsystems[0].Namespaces[0])
		},
		"nsid 0":           func(c *Config) { c.Subsystems[0].Namespaces[0].NSID = 0 },
		"no device":        func(c *Config) { c.Subsystems[0].Namespaces[0].Device = nil },
		"ana group":        func(c *Config) { c.Subsystems[0].Namespaces[0].ANAGroup = MaxANAGroups + 1 },
		"queue size":       func(c *Config) { c.QueueSize = 4096 },
		"in-capsule":       func(c *Config) { c.InCapsuleDataSize = 1000 },
		"host weight":      func(c *Config) { c.HostWeights = map[string]int{"nqn.h": 0} },
		"device depth":     func(c *Config) { c.DeviceQueueDepth = 2000 },
		"maxh2cdata":       func(c *Config) { c.MaxH2CData = 4098 },
		"transfer size":    func(c *Config) { c.MaxTransferSize = 3 << 20 },
		"long serial":      func(c *Config) { c.Subsystems[0].Serial = strings.Repeat("x", 21) },
		"long nqn":         func(c *Config) { c.Subsystems[0].NQN = strings.Repeat("n", 300) },
		"bad listener ana": func(c *Config) { c.Listeners[0].ANA = map[uint32]pdu.ANAState{1: 7} },
		// Negative gave discovery controllers no keep-alive timer at all.
		"discovery kato": func(c *Config) { c.DiscoveryKATO = -time.Second },
	}
	for name, mod := range bad {
		c := good()
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDiscoveryKATORefused: a negative DiscoveryKATO is refused, saying
// what to give (the old Validate took it, and discovery controllers that
// connected with KATO 0 then had no keep-alive timer).
func TestDiscoveryKATORefused(t *testing.T) {
	d, _ := blockdev.NewMem(1<<20, 4096)
	_, err := New(Config{Subsystems: []SubsystemConfig{{NQN: "nqn.a", Namespaces: []NamespaceConfig{{NSID: 1, Device: d}}}},
		Listeners: []ListenerConfig{{Address: "127.0.0.1:0"}}, DiscoveryKATO: -time.Second})
	if want := "discovery kato -1s negative: give 0 (the default, 2m0s) or more"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New: %v, want %q", err, want)
	}
}

// TestDerivedIDs: namespace IDs are stable for the same inputs and differ
// across subsystems and NSIDs (A.8 item 11).
func TestDerivedIDs(t *testing.T) {
	u1, g1 := DeriveNamespaceIDs("nqn.a", 1, "x")
	u2, g2 := DeriveNamespaceIDs("nqn.a", 1, "x")
	u3, _ := DeriveNamespaceIDs("nqn.b", 1, "x")
	u4, _ := DeriveNamespaceIDs("nqn.a", 2, "x")
	if u1 != u2 || g1 != g2 || u1 == u3 || u1 == u4 || u1[6]>>4 != 8 || u1[8]>>6 != 2 {
		t.Fatalf("derived ids %x %x %x %x", u1, u2, u3, u4)
	}
}

// TestNamespaceChangedEvent: a namespace change completes an AER with the
// namespace-attribute notice and lists the NSID in log 04h (A.4.6).
func TestNamespaceChangedEvent(t *testing.T) {
	f := newFixture(t, 1, nil)
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	a.adminUp(0)
	aer := pdu.SQE{Opcode: pdu.AdminAsyncEvent, CID: 31, Flags: pdu.PSDTSGL}
	a.submit(&aer, nil)
	if err := f.t.NamespaceChanged(testNQN, 2); err != nil {
		t.Fatal(err)
	}
	c := pdu.ParseCapsuleResp(a.read().Hdr)
	if ev := pdu.ParseAEREvent(c.DW0); c.CID != 31 || ev.Info != pdu.AENoticeNSChanged || ev.LogPage != pdu.LogChangedNS {
		t.Fatalf("aer %+v", c)
	}
	b, c := a.getLog(pdu.LogChangedNS, 0, 4096, 0)
	if mustOK(t, "changed ns log", c); len(pdu.ParseNSList(b)) != 1 || pdu.ParseNSList(b)[0] != 2 {
		t.Fatalf("changed list %v", pdu.ParseNSList(b))
	}
	if b, _ = a.getLog(pdu.LogChangedNS, 0, 4096, 0); len(pdu.ParseNSList(b)) != 0 {
		t.Fatal("changed list not cleared by the read")
	}
	if f.t.NamespaceChanged("nqn.none", 1) == nil {
		t.Fatal("unknown subsystem accepted")
	}
}
