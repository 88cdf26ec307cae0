// Package proc runs the programs the deploy tools start (flotilla, a
// registry): each in its own process group with its output in a log file,
// killed by the kernel if the tool dies first, and waited for over HTTP. It
// also finds free loopback addresses. The demo and the live fuzzer share it.
package proc
