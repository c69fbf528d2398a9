package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// startProfiles takes a CPU profile of each of s's --pprof listeners
// while the job runs, into OUT/profiles/JOB-NAME.pprof; the function it
// returns waits for them. The profiles last profileSlack longer than the
// job, so that they cover it whenever fio starts its IO (fio takes seconds
// to start on a loaded machine); the idle time adds no samples. A failed
// profile is reported, not fatal.
func startProfiles(o options, s server, j job) func() {
	var wg sync.WaitGroup
	for name, addr := range s.pprof {
		path := filepath.Join(o.out, "profiles", slug(j.Name)+"-"+name+".pprof")
		wg.Go(func() {
			if err := fetchProfile(addr, o.runtime+profileSlack, path); err != nil {
				fmt.Fprintf(os.Stderr, "bench-stack: profile of %s: %v\n", name, err)
			}
		})
	}
	return wg.Wait
}

// profileSlack is how many seconds longer than its job a profile lasts.
const profileSlack = 3

// fetchProfile saves the CPU profile of seconds from the pprof listener
// at addr.
func fetchProfile(addr string, seconds int, path string) error {
	client := http.Client{Timeout: time.Duration(seconds)*time.Second + time.Minute}
	resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
