package localfleet

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

func kubernetesCodecs() runtime.NegotiatedSerializer { return scheme.Codecs.WithoutConversion() }
