package target

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// resvStore keeps a namespace's reservation state in a file so that it
// persists through a target restart (PTPL). Every change is written to a
// temporary file, synced, renamed over the old one and the directory
// synced before the command that made it completes.
//
// The temporary file is kept between changes with resvSpare bytes written
// (reserve), so that a change needs no new space: a thin namespace file
// may fill the file system, and a new owner must still be able to register
// and read what was written.
type resvStore struct {
	path string
}

// resvSpare is the space kept in the temporary file: the state of about 900
// registrants.
const resvSpare = 64 << 10

// maxResvFile bounds the file read at start (1024 registrants fit easily).
const maxResvFile = 1 << 20

// resvFile is the stored form: host IDs as hex strings.
type resvFile struct {
	Gen    uint32    `json:"gen"`
	Type   uint8     `json:"type"`
	Holder string    `json:"holder,omitempty"`
	Regs   []fileReg `json:"registrants"`
}

type fileReg struct {
	Host string `json:"host_id"`
	Key  uint64 `json:"key"`
}

// load reads the stored state; a missing file is the empty state.
func (s *resvStore) load() (*resvState, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &resvState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reservations %s: %w", s.path, err)
	}
	if len(b) > maxResvFile {
		return nil, fmt.Errorf("reservations %s: %d bytes, more than %d", s.path, len(b), maxResvFile)
	}
	var f resvFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("reservations %s: %w", s.path, err)
	}
	st, err := f.state()
	if err != nil {
		return nil, fmt.Errorf("reservations %s: %w", s.path, err)
	}
	return st, nil
}

func (f *resvFile) state() (*resvState, error) {
	st := &resvState{Gen: f.Gen, Type: pdu.ResvType(f.Type)}
	if st.Type != pdu.ResvNone && !st.Type.Valid() {
		return nil, fmt.Errorf("reservation type %d invalid", f.Type)
	}
	if f.Holder != "" {
		h, err := parseHostID(f.Holder)
		if err != nil {
			return nil, err
		}
		st.Holder = h
	}
	for _, r := range f.Regs {
		h, err := parseHostID(r.Host)
		if err != nil {
			return nil, err
		}
		if st.registered(h) {
			return nil, fmt.Errorf("host ID %s registered twice", r.Host)
		}
		st.Regs = append(st.Regs, registration{Host: h, Key: r.Key})
	}
	if st.Type != pdu.ResvNone && (len(st.Regs) == 0 || !st.Type.AllRegistrants() && !st.registered(st.Holder)) {
		return nil, errors.New("reservation holder is not registered")
	}
	return st, nil
}

func parseHostID(s string) (hostID, error) {
	var h hostID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("host ID %q: want 32 hex digits", s)
	}
	copy(h[:], b)
	return h, nil
}

// save stores st atomically and durably.
func (s *resvStore) save(st *resvState) error {
	f := resvFile{Gen: st.Gen, Type: uint8(st.Type), Regs: []fileReg{}}
	if st.Type != pdu.ResvNone && !st.Type.AllRegistrants() {
		f.Holder = fmt.Sprintf("%x", st.Holder[:])
	}
	for _, r := range st.Regs {
		f.Regs = append(f.Regs, fileReg{Host: fmt.Sprintf("%x", r.Host[:]), Key: r.Key})
	}
	b, err := json.Marshal(&f)
	if err != nil {
		return err
	}
	if err := writeFileSync(s.path, b); err != nil {
		return fmt.Errorf("reservations %s: %w", s.path, err)
	}
	s.reserve()
	return nil
}

// reserve writes resvSpare bytes into the temporary file, when it is not
// there, so that the next save needs no new space. It is best effort: on
// a full file system the next save allocates, and may fail.
func (s *resvStore) reserve() {
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return // there already, or the directory is unusable (save says)
	}
	_, werr := f.Write(make([]byte, resvSpare))
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
	}
}

// writeFileSync replaces path with b: temporary file (written over the
// space reserve kept in it), fsync, rename, fsync of the directory.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(b, 0)
	terr := f.Truncate(int64(len(b)))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, terr, serr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
