package target

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// TestOpenFileNamespaces: files are created sparse at their size in order
// (NSIDs 1, 2) with their reservation files beside them, reopened with their data, refused at another size (with
// nothing left open), and a name with a path separator is refused.
func TestOpenFileNamespaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	specs := []FileNamespace{{Name: "a", Size: 1 << 20}, {Name: "b", Size: 2 << 20, ANAGroup: 2}}
	nss, err := OpenFileNamespaces(dir, 4096, specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ns := range nss {
		if ns.NSID != uint32(i+1) || ns.Name != specs[i].Name || ns.Device.Size() != specs[i].Size || ns.ANAGroup != specs[i].ANAGroup ||
			ns.ReservationFile != filepath.Join(dir, specs[i].Name+".resv") {
			t.Errorf("namespace %d: %+v", i, ns)
		}
	}
	if err := nss[1].Device.WriteAt(context.Background(), []byte(strings.Repeat("x", 4096)), 0); err != nil {
		t.Fatal(err)
	}
	if err := CloseNamespaces(nss); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.img")); err != nil {
		t.Fatal(err)
	}
	nss, err = OpenFileNamespaces(dir, 4096, specs)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if err := nss[1].Device.ReadAt(context.Background(), got, 0); err != nil || got[0] != 'x' {
		t.Errorf("reopened namespace lost its data: %q, %v", got[:4], err)
	}
	CloseNamespaces(nss)
	specs[1].Size = 4 << 20
	if _, err := OpenFileNamespaces(dir, 4096, specs); err == nil {
		t.Error("an existing file of another size was accepted")
	}
	if _, err := OpenFileNamespaces(dir, 4096, []FileNamespace{{Name: "../x", Size: 1 << 20}}); !errors.Is(err, blockdev.ErrInvalid) {
		t.Errorf("a name with a path separator: %v", err)
	}
}

// TestServeControl: the control API answers on the bound address, to
// ControlClient too, until stopped.
func TestServeControl(t *testing.T) {
	f := newFixture(t, 1, nil)
	addr, stop, err := f.t.ServeControl("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/ana", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"optimized"`) {
		t.Errorf("GET /v1/ana: %s %s", resp.Status, body)
	}
	cc := ControlClient{Addr: addr, Token: "tok"}
	ctx := context.Background()
	if err := cc.SetANAState(ctx, "0", 1, "inaccessible"); err != nil {
		t.Fatal(err)
	}
	if es, err := cc.ANAStates(ctx); err != nil || len(es) == 0 || es[0].Group != 1 || es[0].State != "inaccessible" {
		t.Errorf("states after setting one: %+v, %v", es, err)
	}
	if err := cc.SetANAState(ctx, "0", 1, "sideways"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("an unknown state: %v, want the 400 answer", err)
	}
	stop()
	if _, err := cc.ANAStates(ctx); err == nil {
		t.Error("the client got an answer after stop")
	}
	if _, err := http.Get("http://" + addr + "/v1/ana"); err == nil {
		t.Error("the control API answers after stop")
	}
}
