package tasks

import (
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The runs of one cluster share the clients made of its config; another
// config gets its own; a config dropped takes its clients with it.
func TestClientsForKeepsAConfigsClients(t *testing.T) {
	a, b := &rest.Config{Host: "https://127.0.0.1:1"}, &rest.Config{Host: "https://127.0.0.1:1"}
	kubeA, flA, err := clientsFor(a)
	if err != nil {
		t.Fatal(err)
	}
	kubeA2, flA2, err := clientsFor(a)
	if err != nil {
		t.Fatal(err)
	}
	if kubeA != kubeA2 || flA != flA2 {
		t.Error("a config's second run made new clients")
	}
	kubeB, _, err := clientsFor(b)
	if err != nil {
		t.Fatal(err)
	}
	if kubeB == kubeA {
		t.Error("another config got the first one's clients")
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	deadline := time.Now().Add(10 * time.Second)
	for entries() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d configs' clients kept after the configs were dropped", entries())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func entries() int {
	n := 0
	made.Range(func(any, any) bool { n++; return true })
	return n
}
