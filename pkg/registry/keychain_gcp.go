package registry

import (
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/google"
)

// gcpKeychain answers for Google's registries (gcr.io, *.gcr.io and
// *-docker.pkg.dev) with Application Default Credentials: GKE workload
// identity in a pod, GOOGLE_APPLICATION_CREDENTIALS, or gcloud's. Other
// hosts get nothing from it.
func gcpKeychain() authn.Keychain { return google.Keychain }
