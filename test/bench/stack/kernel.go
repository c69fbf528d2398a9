package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// attachKernel attaches the NBD export at uri as a kernel block device
// with nbd-client, where the nbd module is loaded; it returns the device
// and how to detach it, or why it cannot.
func attachKernel(c *cluster, uri string) (string, func(), error) {
	if _, err := os.Stat("/sys/module/nbd"); err != nil {
		return "", nil, errors.New("the nbd kernel module is not loaded (modprobe nbd)")
	}
	if _, err := exec.LookPath("nbd-client"); err != nil {
		return "", nil, errors.New("nbd-client is not installed (Debian package nbd-client)")
	}
	dev, err := freeNBD()
	if err != nil {
		return "", nil, err
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", nil, err
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", nil, err
	}
	out, err := exec.Command("nbd-client", host, port, dev, "-N", strings.TrimPrefix(u.Path, "/")).CombinedOutput()
	fmt.Fprintf(c.log, "$ nbd-client %s %s %s\n%s", host, port, dev, out)
	if err != nil {
		return "", nil, fmt.Errorf("nbd-client: %w: %s", err, out)
	}
	return dev, func() { exec.Command("nbd-client", "-d", dev).Run() }, nil
}

// freeNBD is the first /dev/nbdN no client holds (size 0, no pid).
func freeNBD() (string, error) {
	blocks, _ := filepath.Glob("/sys/block/nbd*")
	for _, b := range blocks {
		size, err := os.ReadFile(filepath.Join(b, "size"))
		if err != nil || strings.TrimSpace(string(size)) != "0" {
			continue
		}
		if _, err := os.Stat(filepath.Join(b, "pid")); err == nil {
			continue
		}
		return "/dev/" + filepath.Base(b), nil
	}
	return "", errors.New("no free /dev/nbdN")
}
