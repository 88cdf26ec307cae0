// Package config holds flotilla's example configuration, its schema and the
// CRDs flotilla owns.
package config
