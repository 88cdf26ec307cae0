package registry

import (
	"github.com/chrismellard/docker-credential-acr-env/pkg/credhelper"
	"github.com/google/go-containerregistry/pkg/authn"
)

// azureKeychain answers for Azure Container Registry (*.azurecr.io and the
// sovereign clouds' suffixes) with the identity in the environment
// (AZURE_CLIENT_ID and AZURE_TENANT_ID with a secret, a certificate or AKS
// workload identity's federated token, or a managed identity). Other hosts
// get nothing from it.
func azureKeychain() authn.Keychain {
	return authn.NewKeychainFromHelper(credhelper.NewACRCredentialsHelper())
}
