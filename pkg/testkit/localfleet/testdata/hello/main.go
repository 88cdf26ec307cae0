// Command hello is the image of TestRealNode: it prints a line the test
// finds in the pod's log (with the limits the container got) and serves
// HTTP on :8080, where the pod's readiness probe and the test get "ok".
package main

import (
	"fmt"
	"net/http"
	"os"
	"syscall"
	"time"
)

func main() {
	var nofile syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile)
	host, _ := os.Hostname()
	fmt.Printf("hello from a real container on %s (pid %d, RLIMIT_NOFILE %d:%d)\n", host, os.Getpid(), nofile.Cur, nofile.Max)
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok from", host) })
	srv := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
