package registry

import (
	"io"

	ecr "github.com/awslabs/amazon-ecr-credential-helper/ecr-login"
	"github.com/google/go-containerregistry/pkg/authn"
)

// awsKeychain answers for Amazon ECR registries
// (<account>.dkr.ecr.<region>.amazonaws.com, public.ecr.aws) with the AWS
// SDK's default credentials: IRSA or EKS Pod Identity in a pod, the
// environment, the shared config. Other hosts get nothing from it.
func awsKeychain() authn.Keychain {
	return authn.NewKeychainFromHelper(ecr.NewECRHelper(ecr.WithLogger(io.Discard)))
}
