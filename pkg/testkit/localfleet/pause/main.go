// Command pause is the sandbox ("pause") container of a real node's pods: it
// holds the pod's namespaces, reaps zombies and exits on SIGINT or SIGTERM,
// like Kubernetes' own pause, which cannot be pulled here (no internet).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
