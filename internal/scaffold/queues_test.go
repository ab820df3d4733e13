package scaffold

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/template"
)

// Which queues exist is declared once, by template.yaml's queue resources
// and the worker's event sources; CloudFormation has no loops, so every
// list of them the template spells out (the worker's queue table, the DLQ
// lists of the functions, the alarms) is checked here to be what those
// declare:
//   - ROUTE_QUEUES, the worker's queue table, names exactly the worker's
//     event sources other than the chat and background queues (a route
//     queue without an event source would never run its routes; an event
//     source no route names would be idle);
//   - every queue the worker reads has a dead-letter queue, and every list
//     of DLQs a function is given (CHATOPS_DLQS, ALERT_DLQS) is the DLQs of
//     the worker's queues (and, for ALERT_DLQS, every DLQ of the template);
//   - every DLQ has an alarm on its depth.
func TestTemplateDeclaresEachQueueOnce(t *testing.T) {
	top, err := template.Load(repo+"/template.yaml", map[string]string{"OperatorLineIds": "U0000000000000000000000000000cafe"})
	if err != nil {
		t.Fatal(err)
	}
	queues := map[string]template.Queue{}
	byURL := map[string]template.Queue{}
	for _, q := range top.Queues {
		queues[q.LogicalID], byURL[q.URL] = q, q
	}
	var worker *template.Function
	for i, f := range top.Functions {
		if _, ok := f.Env["ROUTE_QUEUES"]; ok {
			worker = &top.Functions[i]
		}
	}
	if worker == nil {
		t.Fatal("no function has ROUTE_QUEUES: the worker's queue table")
	}
	routes := map[string]string{} // logical id -> route name
	for _, pair := range strings.Split(worker.Env["ROUTE_QUEUES"], ",") {
		name, url, _ := strings.Cut(pair, "=")
		q, ok := byURL[url]
		if !ok {
			t.Fatalf("ROUTE_QUEUES %s=%s is not a queue of the template", name, url)
		}
		routes[q.LogicalID] = name
	}
	if routes["LongQueue"] != "long" {
		t.Errorf("ROUTE_QUEUES %v: the LongQueue must be the route queue named long (bot.Queue(\"long\"), debounced bursts)", routes)
	}
	sources := map[string]bool{}
	for _, m := range worker.SQSEvents {
		sources[m.Queue] = true
		if _, routed := routes[m.Queue]; !routed && m.Queue != "InteractiveQueue" && m.Queue != "BackgroundQueue" {
			t.Errorf("the worker reads %s, which ROUTE_QUEUES does not name: no route can run there", m.Queue)
		}
	}
	for id := range routes {
		if !sources[id] {
			t.Errorf("ROUTE_QUEUES names %s, but the worker has no event source on it: its routes would never run", id)
		}
	}
	var workerDLQs []string
	for id := range sources {
		dlq := queues[id].RedriveTarget
		if dlq == "" {
			t.Errorf("the worker's queue %s has no dead-letter queue", id)
			continue
		}
		workerDLQs = append(workerDLQs, queues[dlq].Name)
	}
	allDLQs := map[string]bool{}
	for _, q := range top.Queues {
		if q.RedriveTarget != "" {
			allDLQs[q.RedriveTarget] = true
		}
	}
	for _, r := range top.Rules {
		for _, tg := range r.Targets {
			if tg.DLQLogicalID != "" {
				allDLQs[tg.DLQLogicalID] = true
			}
		}
	}
	for _, f := range top.Functions {
		if f.OnFailureQueue != "" {
			allDLQs[f.OnFailureQueue] = true
		}
	}
	var allNames, allURLs []string
	for id := range allDLQs {
		allNames, allURLs = append(allNames, queues[id].Name), append(allURLs, queues[id].URL)
	}
	lists := 0
	for _, f := range top.Functions {
		if v, ok := f.Env["CHATOPS_DLQS"]; ok && v != "" {
			lists++
			if got := sortedList(v); !slices.Equal(got, sorted(workerDLQs)) {
				t.Errorf("%s CHATOPS_DLQS %q, want the worker's queues' DLQs %q", f.LogicalID, got, sorted(workerDLQs))
			}
		}
		if v, ok := f.Env["ALERT_DLQS"]; ok && v != "" {
			if got := sortedList(v); !slices.Equal(got, sorted(allURLs)) && !slices.Equal(got, sorted(allNames)) {
				t.Errorf("%s ALERT_DLQS %q, want every DLQ of the template %q", f.LogicalID, got, sorted(allNames))
			}
		}
	}
	if lists < 2 {
		t.Errorf("CHATOPS_DLQS found on %d functions, want the worker's and the notifier's", lists)
	}
	for id := range allDLQs {
		name, alarmed := queues[id].Name, false
		for _, a := range top.Alarms {
			if a.MetricName == "ApproximateNumberOfMessagesVisible" && a.Dimensions["QueueName"] == name {
				alarmed = true
			}
		}
		if !alarmed {
			t.Errorf("the DLQ %s has no alarm on its depth", id)
		}
	}
	if len(allDLQs) < 4 {
		t.Fatalf("found %d DLQs (%v): the check above would pass vacuously", len(allDLQs), slices.Sorted(maps.Keys(allDLQs)))
	}
}

func sortedList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return sorted(out)
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
