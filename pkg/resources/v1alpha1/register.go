package v1alpha1

import (
	_ "embed"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "flotilla.dev", Version: "v1alpha1"}

// Applications is the Applications' resource.
var Applications = GroupVersion.WithResource("applications")

// CRD is the Application CustomResourceDefinition, as controller-gen
// writes it (the chart's crds/ holds the same file).
//
//go:embed crds/flotilla.dev_applications.yaml
var CRD []byte

// AddToScheme registers the API's types in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Application{}, &ApplicationList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
