// Package freeport hands tests TCP ports on 127.0.0.1 for servers they
// start as other processes (kube-apiserver, Gitea, flotilla serve), which
// must be told a port before they bind it.
//
// The usual trick, binding port 0 and closing the listener, races: the
// kernel hands the same ephemeral port to the next process that binds port 0
// or connects (make test runs hundreds of them side by side), and the
// server then fails with "address already in use". The ports here are
// chosen at random below the kernel's ephemeral range, which no such
// process gets, checked free, and never handed out twice by one process.
package freeport
