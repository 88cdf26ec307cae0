// Package cli is flotilla's command line, built with cobra. Main builds the
// command tree and runs it; every command writes to the writers it is given, so
// tests run the CLI in process.
package cli
