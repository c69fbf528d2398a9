package meta

import (
	"context"
	"sync"
)

// Lazy is a store opened at its first use and kept: a daemon that needs
// etcd only now and then (a gossip member finding its seeds) starts while
// etcd is unreachable. Safe for concurrent use.
type Lazy struct {
	open func(context.Context) (*Store, error)
	mu   sync.Mutex
	s    *Store
}

// NewLazy returns a Lazy that opens its store with open.
func NewLazy(open func(context.Context) (*Store, error)) *Lazy { return &Lazy{open: open} }

// Open returns the store, opening it at the first call that succeeds.
func (l *Lazy) Open(ctx context.Context) (*Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		return l.s, nil
	}
	s, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	l.s = s
	return s, nil
}

// Close closes the store if it was opened; a later Open opens it again.
func (l *Lazy) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		l.s.Close()
		l.s = nil
	}
}
