// Command hello is the image of TestRealNode: it prints a line the test
// finds in the pod's log (with the limits the container got) and serves
// HTTP on :8080, where the pod's readiness probe and the test get "ok", and
// /fetch?url=U answers what a GET of U from inside the pod answered.
package main

import (
	"fmt"
	"io"
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
	http.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		client := &http.Client{Timeout: 5 * time.Second}
		resp, err := client.Get(r.URL.Query().Get("url"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	})
	srv := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
