package csi

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// The test binary runs an agent instead of the tests when these are set
// (agentProcess): a node agent in a process of its own, which a test can
// kill like a real one.
const (
	envAgentEtcd   = "NVSTRIPE_CSI_TEST_AGENT_ETCD"
	envAgentSocket = "NVSTRIPE_CSI_TEST_AGENT_SOCKET"
	envAgentState  = "NVSTRIPE_CSI_TEST_AGENT_STATE"
	envAgentHolder = "NVSTRIPE_CSI_TEST_AGENT_HOLDER"
)

func TestMain(m *testing.M) {
	if eps := os.Getenv(envAgentEtcd); eps != "" {
		os.Exit(runAgent(strings.Split(eps, ",")))
	}
	os.Exit(m.Run())
}

// runAgent serves an agent until SIGTERM or SIGINT.
func runAgent(endpoints []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	store, err := meta.Open(ctx, meta.Config{Endpoints: endpoints})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	defer store.Close()
	err = agent.Serve(ctx, agent.ServeOptions{Socket: os.Getenv(envAgentSocket), Options: agent.Options{
		Store: store, Holder: os.Getenv(envAgentHolder), StateDir: os.Getenv(envAgentState), LeaseTTL: 3 * time.Second,
		RetryInterval: 100 * time.Millisecond,
		Namespaces:    volclient.NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second}}})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// agentProcess is an agent in a child process (the test binary, see
// TestMain), restartable on the same state directory.
type agentProcess struct {
	t       *testing.T
	env     []string
	socket  string
	cmd     *exec.Cmd
	stopped chan struct{}
}

func (c *cluster) startAgentProcess(t *testing.T, holder string) *agentProcess {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { detachUnder(t, dir) })
	a := &agentProcess{t: t, socket: filepath.Join(dir, "agent.sock"), env: append(os.Environ(),
		envAgentEtcd+"="+strings.Join(c.endpoints, ","), envAgentSocket+"="+filepath.Join(dir, "agent.sock"),
		envAgentState+"="+filepath.Join(dir, "state"), envAgentHolder+"="+holder)}
	a.start()
	t.Cleanup(func() { a.stop(syscall.SIGTERM) })
	return a
}

// start runs the agent and waits until its API answers.
func (a *agentProcess) start() {
	a.t.Helper()
	a.cmd = exec.Command(os.Args[0], "-test.run=^$")
	a.cmd.Env, a.cmd.Stdout, a.cmd.Stderr = a.env, os.Stderr, os.Stderr
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.stopped = make(chan struct{})
	go func() { a.cmd.Wait(); close(a.stopped) }()
	waitFor(a.t, "the agent's API", func() bool {
		select {
		case <-a.stopped:
			a.t.Fatal("the agent process exited")
		default:
		}
		return api.WithClient(a.socket, func(c *api.Client) error {
			_, err := c.Status(context.Background(), &api.StatusRequest{})
			return err
		}) == nil
	})
}

// stop sends sig and waits for the process to end.
func (a *agentProcess) stop(sig syscall.Signal) {
	if a.cmd == nil {
		return
	}
	a.cmd.Process.Signal(sig)
	<-a.stopped
	a.cmd = nil
}

// waitFor is testutil.WaitFor under this package's old name.
var waitFor = testutil.WaitFor
