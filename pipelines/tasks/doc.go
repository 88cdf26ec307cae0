// Package tasks holds the step logic of flotilla's pipeline tasks. The same
// functions run in the embedded executor and, through `flotilla task ...`,
// as the steps of Tekton Tasks.
package tasks
