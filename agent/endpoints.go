package agent

import (
	"context"
	"fmt"

	"github.com/nvstripe/nvstripe/agent/api"
)

// MetricsEndpoints returns the URLs of the Prometheus endpoints of the
// agent on agentSocket and of every foreground map registered in mapDir
// that serves metrics (their Status names them), for `nvstripe top`. A
// socket that does not answer is told to warn and left out; one with no
// metrics listener is left out silently.
func MetricsEndpoints(ctx context.Context, agentSocket, mapDir string, warn func(string)) []string {
	socks := liveRecords(mapDir)
	if probeSocket(agentSocket) == nil {
		socks = append([]string{agentSocket}, socks...)
	}
	var urls []string
	for _, s := range socks {
		addr, err := metricsOf(ctx, s)
		if err != nil {
			warn(fmt.Sprintf("skipped %s: %v", s, err))
			continue
		}
		if addr != "" {
			urls = append(urls, "http://"+addr+"/metrics")
		}
	}
	return urls
}

// metricsOf asks the API on sock for its metrics address.
func metricsOf(ctx context.Context, sock string) (string, error) {
	c, err := api.Dial(sock)
	if err != nil {
		return "", err
	}
	defer c.Close()
	st, err := c.Status(ctx, &api.StatusRequest{})
	if err != nil {
		return "", err
	}
	return st.Metrics, nil
}
