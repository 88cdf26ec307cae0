// Package config loads, defaults and validates flotilla's configuration file:
// the webhook receivers, the fleet of clusters and its waves, and the
// applications whose image digests flotilla carries through the fleet.
//
// Load and Parse decode YAML strictly: an unknown field (matched case
// sensitively), a duplicate key or a value of the wrong type is a parse error
// that names the file, the line and the field's path. A config that parses is
// then defaulted and validated as a whole; every problem found is reported at
// once in a *ValidationError, in the order found (top-level sections in the
// order of Config's fields, then entries in document order), each with the
// path of the offending field, such as "applications[0].track".
//
// Loading touches the filesystem and environment: relative paths (the data
// directory, kubeconfigs and secret files) are resolved against the config
// file's directory (Parse's baseDir) and made absolute, each kubeconfig must
// exist, and every receiver's secret is read from its environment variable
// or file into Receiver.SecretValue. Parse does the same checks as Load, so a
// test that parses a config naming fixed paths points those paths at files it
// created (see the test of config/example.yaml). Secret values never appear
// in errors, and SecretValue is never marshalled.
//
// A running flotilla holds its configuration in a Live, which pkg/reload
// swaps whole; the consumers read it through a Provider once per event.
// RestartFields names what a swap cannot change (what was built once at
// start-up from it).
//
// The application's types are also the spec of the Application custom
// resource (pkg/resources/v1alpha1), whose schema controller-gen writes
// from them: their fields are optional there as here (the validator says
// what is required).
//
// +kubebuilder:validation:Optional
package config
