package agent

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// stateStore is the agent's durable local state: the mappings it should
// serve, in a badger database, so that a restarted agent restores them.
//
// Keys are "mapping/<volume>"; values are a stateRecord in JSON. Writes are
// synchronous (fsync), so a mapping acknowledged to a client survives a crash.
// A nil *stateStore keeps nothing (the foreground `nvstripe map`).
type stateStore struct {
	db *badger.DB
}

const mappingPrefix = "mapping/"

// stateRecord is one persisted mapping. V is the record version (1).
type stateRecord struct {
	V int `json:"v"`
	Spec
}

// openState opens (creating) the database in dir; "" means no state.
func openState(dir string) (*stateStore, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent state: %w", err)
	}
	// A few records: small tables and logs, no caches, no compression.
	o := badger.DefaultOptions(dir).WithLogger(nil).WithSyncWrites(true).
		WithMemTableSize(1 << 20).WithBaseTableSize(256 << 10).WithValueLogFileSize(1 << 20).
		WithBlockCacheSize(0).WithIndexCacheSize(0).WithCompression(options.None).
		WithNumCompactors(2).WithNumMemtables(1).WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(2).
		WithMetricsEnabled(false).WithValueThreshold(4 << 10)
	db, err := badger.Open(o)
	if err != nil {
		return nil, fmt.Errorf("agent state in %s (is another agent using it?): %w", dir, err)
	}
	return &stateStore{db: db}, nil
}

func (s *stateStore) close() error {
	if s == nil {
		return nil
	}
	return s.db.Close()
}

// put records a mapping, replacing one of the same volume.
func (s *stateStore) put(sp Spec) error {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(stateRecord{V: 1, Spec: sp})
	if err != nil {
		return err
	}
	err = s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(mappingPrefix+sp.Volume), b) })
	if err != nil {
		return fmt.Errorf("agent state: recording %s: %w", sp.Volume, err)
	}
	return nil
}

// remove forgets a mapping.
func (s *stateStore) remove(volume string) error {
	if s == nil {
		return nil
	}
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(mappingPrefix + volume)) })
	if err != nil {
		return fmt.Errorf("agent state: forgetting %s: %w", volume, err)
	}
	return nil
}

// specs returns every recorded mapping in key order. Records that do not
// decode or validate are returned as errors (and left in place, for an
// operator to look at), not dropped silently.
func (s *stateStore) specs() ([]Spec, []error, error) {
	if s == nil {
		return nil, nil, nil
	}
	var out []Spec
	var bad []error
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(mappingPrefix), PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := string(it.Item().Key())
			err := it.Item().Value(func(v []byte) error {
				sp, err := decodeRecord(key, v)
				if err != nil {
					bad = append(bad, err)
					return nil
				}
				out = append(out, sp)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("agent state: reading mappings: %w", err)
	}
	return out, bad, nil
}

func decodeRecord(key string, v []byte) (Spec, error) {
	var r stateRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Spec{}, fmt.Errorf("agent state: record %s: %w", key, err)
	}
	if r.V != 1 {
		return Spec{}, fmt.Errorf("agent state: record %s has version %d, this agent knows 1", key, r.V)
	}
	if err := r.Spec.Validate(); err != nil {
		return Spec{}, fmt.Errorf("agent state: record %s is not a valid mapping: %w", key, err)
	}
	if mappingPrefix+r.Volume != key {
		return Spec{}, fmt.Errorf("agent state: record %s names volume %q", key, r.Volume)
	}
	return r.Spec, nil
}
