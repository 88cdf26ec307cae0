package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/registry"
)

// The providers the config accepts are the keychains the registry client has.
func TestRegistryProvidersAgree(t *testing.T) {
	if diff := cmp.Diff(config.RegistryProviders, registry.Providers()); diff != "" {
		t.Errorf("config.RegistryProviders vs registry.Providers() (-config +registry)\n%s", diff)
	}
}
