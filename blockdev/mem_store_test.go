package blockdev

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// IO on a span of a page goes ahead while another span of it is held.
func TestPageStoreDisjointSpansInParallel(t *testing.T) {
	s := newPageStore(2 * memPageSize)
	s.write(bytes.Repeat([]byte{1}, memPageSize), 0)
	pg := s.pages[0].Load()
	pg.spans[0].Lock() // a write in progress on the first span

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.write(bytes.Repeat([]byte{2}, 2*memSpanSize), 2*memSpanSize)
		s.read(make([]byte, memSpanSize), 8*memSpanSize)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("IO on other spans of the page waited for the held span")
	}

	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		s.write(bytes.Repeat([]byte{3}, 4096), 0)
	}()
	pg.spans[0].Unlock()
	<-blocked
	got := make([]byte, 5*memSpanSize)
	s.read(got, 0)
	want := append(append(append(bytes.Repeat([]byte{3}, 4096),
		bytes.Repeat([]byte{1}, 2*memSpanSize-4096)...),
		bytes.Repeat([]byte{2}, 2*memSpanSize)...),
		bytes.Repeat([]byte{1}, memSpanSize)...)
	if !bytes.Equal(got, want) {
		t.Fatal("contents after the writes differ")
	}
}

// Overlapping IO is serialised: a read spanning several spans sees one
// write's bytes, never a mix of two.
func TestPageStoreOverlappingIOSerialised(t *testing.T) {
	s := newPageStore(memPageSize)
	const off, n = memSpanSize / 2, 2 * memSpanSize // three spans
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			buf := bytes.Repeat([]byte{byte(w + 1)}, n)
			for range 200 {
				s.write(buf, off)
			}
		})
	}
	torn := make(chan []byte, 1)
	wg.Go(func() {
		got := make([]byte, n)
		for range 400 {
			s.read(got, off)
			if !bytes.Equal(got, bytes.Repeat(got[:1], n)) {
				select {
				case torn <- append([]byte(nil), got...):
				default:
				}
				return
			}
		}
	})
	wg.Wait()
	select {
	case got := <-torn:
		t.Fatalf("read mixed writes: starts %d, ends %d", got[0], got[n-1])
	default:
	}
}
