package discovery

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeconfigOnly: of Cluster API's Secrets, the watch holds the data of
// the kubeconfig Secrets alone, not the cluster's CA or etcd keys.
func TestKubeconfigOnly(t *testing.T) {
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: name, Labels: map[string]string{LabelClusterName: "prod-eu"}},
			Type: SecretTypeClusterAPI, Data: map[string][]byte{"value": []byte("kubeconfig"), "tls.key": []byte("key")}}
	}
	for _, tc := range []struct {
		name     string
		wantData map[string][]byte
	}{
		{name: "prod-eu-kubeconfig", wantData: map[string][]byte{"value": []byte("kubeconfig"), "tls.key": []byte("key")}},
		{name: "prod-eu-ca"},
		{name: "prod-eu-etcd"},
	} {
		in := secret(tc.name)
		got, err := kubeconfigOnly(in)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := got.(*corev1.Secret)
		if s == nil || s.Name != tc.name {
			t.Fatalf("%s: got %#v", tc.name, got)
		}
		if diff := cmp.Diff(tc.wantData, s.Data); diff != "" {
			t.Errorf("%s: data held (-want +got):\n%s", tc.name, diff)
		}
		if len(in.Data) != 2 {
			t.Errorf("%s: the object given was changed", tc.name)
		}
	}
}
