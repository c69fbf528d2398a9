package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// grafanaDashboard is what the test reads of a Grafana dashboard.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// agentMetric finds a metric name in a PromQL expression.
var agentMetric = regexp.MustCompile(`nvstripe_agent_[a-z_]+`)

// TestGrafanaDashboard: the dashboards in deploy/grafana parse, every
// panel has a query, every query selects by the $volume variable the
// dashboard defines, its brackets balance, and every agent metric it names
// is one package agent registers (agent/metrics.go).
func TestGrafanaDashboard(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "agent", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("grafana", "*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboard in deploy/grafana")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d grafanaDashboard
		dec := json.NewDecoder(strings.NewReader(string(b)))
		if err := dec.Decode(&d); err != nil || d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
			t.Fatalf("%s: %v (uid %q, title %q, %d panels)", f, err, d.UID, d.Title, len(d.Panels))
		}
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		if !vars["volume"] || !vars["datasource"] {
			t.Errorf("%s: variables %v, want volume and datasource", f, vars)
		}
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, q := range p.Targets {
				checkQuery(t, f+": "+p.Title, q.Expr, string(src))
			}
		}
	}
}

// checkQuery checks one PromQL expression of a panel.
func checkQuery(t *testing.T, where, expr, metricsSrc string) {
	t.Helper()
	if !strings.Contains(expr, `volume=~"$volume"`) {
		t.Errorf("%s: %q does not select by $volume", where, expr)
	}
	for _, pair := range []string{"()", "{}", "[]"} {
		if strings.Count(expr, pair[:1]) != strings.Count(expr, pair[1:]) {
			t.Errorf("%s: %q: unbalanced %s", where, expr, pair)
		}
	}
	names := agentMetric.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q names no agent metric", where, expr)
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "nvstripe_agent_"), "_bucket")
		if !strings.Contains(metricsSrc, `Name: "`+name+`"`) {
			t.Errorf("%s: %s is not a metric of package agent (agent/metrics.go)", where, n)
		}
	}
}
