// Package version reports which flotilla this is: the version stamped at build
// time with -ldflags, else the module version Go recorded (go install ...@v1.2.3),
// else "devel".
package version
