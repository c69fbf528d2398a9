// Package qos limits a block device's IO with token buckets: requests a
// second and bytes a second, in total and per direction, each bucket
// holding a burst of its limit. A Limiter keeps the buckets and makes each
// request wait for its turn; Device puts one in front of a blockdev.Device.
// The agent puts one in front of every mapping of a volume whose record
// has limits, and changes them on the live mapping when the record changes.
//
// # The buckets
//
// A bucket of rate r and capacity c fills at r tokens a second up to c. A
// request of n takes n tokens at once, even when fewer are there: the
// bucket goes into debt, and the request waits until the bucket has filled
// back to what it owes (the debt of the requests before it included). So
// requests go in the order they asked, a request larger than the burst is
// not refused (it waits as long as its size needs: a 1 MiB write under a
// 64 KiB/s limit with a full 64 KiB bucket waits 15 s), and over any stretch of time in which
// requests keep coming, the bucket lets through at most r times its length
// plus c. Read and write requests count one each in the request buckets
// whatever their size; trim and write-zeroes count as write requests that
// move no bytes; flush counts nothing.
//
// Each bucket keeps two counts, the tokens filled since it was made
// (capped at the capacity above what was taken) and the tokens taken; a
// waiting request holds the count taken had after it took its tokens and
// may go once the count filled reaches it. A change of rate then applies at once
// to the requests already waiting (they are woken and work out their turn
// at the new rate), and a request whose context ends while it waits gives
// its tokens back. Counters are float64: exact for request counts, and
// within a byte per 2^53 bytes for bytes.
//
// Why not golang.org/x/time/rate: its WaitN refuses a request larger than
// the burst (a byte bucket would need a burst above the largest IO, 32 MiB
// for NBD), a request that must take from up to four buckets would hold
// tokens of one while it waits for another with no way to see a rate
// change, and the arithmetic here is a few lines that are tested exactly
// on given times (bucket_test.go) and in testing/synctest (limiter_test.go).
//
// # Concurrency
//
// A Limiter is safe for concurrent use. Its work when nothing is limited is
// one atomic load; otherwise a mutex held for a few float operations.
package qos
