package kube

import (
	"strings"
	"testing"
)

// TestNodesNotReady checks the start's wait for fake Nodes: Ready, with
// exactly the taints asked for (the not-ready taint gone), all of them.
func TestNodesNotReady(t *testing.T) {
	want := map[string][]Taint{
		"a": {},
		"b": {{Key: "dedicated", Value: "cache", Effect: "NoSchedule"}},
	}
	node := func(name, ready, taints string) string {
		return `{"metadata":{"name":"` + name + `"},"spec":{"taints":[` + taints + `]},` +
			`"status":{"conditions":[{"type":"Ready","status":"` + ready + `"}]}}`
	}
	const dedicated = `{"key":"dedicated","value":"cache","effect":"NoSchedule"}`
	const notReady = `{"key":"node.kubernetes.io/not-ready","effect":"NoSchedule"}`
	tests := []struct {
		name  string
		nodes []string
		want  string // in the answer; "" for all ready
	}{
		{"all ready", []string{node("a", "True", ""), node("b", "True", dedicated)}, ""},
		{"other nodes ignored", []string{node("a", "True", ""), node("b", "True", dedicated), node("c", "False", "")}, ""},
		{"one missing", []string{node("a", "True", "")}, "1 of 2 Nodes exist"},
		{"not ready", []string{node("a", "False", ""), node("b", "True", dedicated)}, "Node a not Ready"},
		{"not-ready taint left", []string{node("a", "True", notReady), node("b", "True", dedicated)}, "Node a has taints [node.kubernetes.io/not-ready=:NoSchedule], want []"},
		{"own taint missing", []string{node("a", "True", ""), node("b", "True", "")}, "Node b has taints [], want [dedicated=cache:NoSchedule]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nodesNotReady(`{"items":[`+strings.Join(tt.nodes, ",")+`]}`, want)
			if got != tt.want {
				t.Errorf("nodesNotReady = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestOptionsCheck checks that fake Nodes without the controller manager
// are refused: their not-ready taint would never go.
func TestOptionsCheck(t *testing.T) {
	if err := (Options{Nodes: []Node{{Name: "a"}}}).check(); err == nil {
		t.Error("Options{Nodes} without Controllers: check() = nil, want an error")
	}
	if err := (Options{Controllers: true, Nodes: []Node{{Name: "a"}}, Metacontroller: true}).check(); err != nil {
		t.Errorf("Options{Controllers, Nodes, Metacontroller}: check() = %v, want nil", err)
	}
}
