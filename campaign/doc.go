// Package campaign is the fault campaign: TestCampaign starts real
// processes (an etcd, four `target serve`, a controller and a foreground
// `map` serving a 2+1 volume over NBD), runs a verifying workload through
// the NBD export that records every acknowledged write, and in randomized
// rounds injects one fault while it runs: kill -9 or SIGSTOP/SIGCONT of a
// target, of etcd, of the controller, or kill -9 of the owner (the map
// process), and SIGSTOP of etcd for 12 s, past the owner's lease TTL.
// After each round it brings every process back, waits for the controller
// to report the volume healthy with no task or blocked shard left, and
// reads back every block the workload wrote: each must hold its last
// acknowledged content (or the content of a later write that failed, which
// may or may not have landed).
//
// Each round prints its seed; -campaign.seed=S -campaign.rounds=1 replays
// that round's fault schedule (on a fresh cluster). `make test` runs three
// rounds; `make campaign` fifty.
package campaign
