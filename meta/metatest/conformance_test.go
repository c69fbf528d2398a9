package metatest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestConformanceMem(t *testing.T) {
	RunConformance(t, func(t *testing.T) Backend {
		srv := MemClock(t)
		return Backend{
			Client: func(testing.TB) *clientv3.Client { return srv.Client() },
			Pass:   func(_ testing.TB, d time.Duration) { srv.Clock().Advance(d) },
		}
	})
}

func TestConformanceEtcd(t *testing.T) {
	RunConformance(t, func(t *testing.T) Backend {
		eps := Start(t)
		return Backend{
			Client: func(t testing.TB) *clientv3.Client {
				c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
				if err != nil {
					t.Fatal(err)
				}
				return c
			},
			Pass: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
		}
	})
}
