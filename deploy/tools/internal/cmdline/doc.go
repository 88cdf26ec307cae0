// Package cmdline is the deploy tools' command line, the same for each:
// its flags parsed from the arguments, then the tool run with a context
// that ends on an interrupt or SIGTERM, and an error printed after the
// tool's name, exiting 1.
package cmdline
