package discovery_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// argoSecret is an Argo CD cluster Secret of argocd/name with data.
func argoSecret(name string, labels map[string]string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: name, Labels: map[string]string{discovery.LabelSecretType: discovery.SecretTypeCluster}},
		Data: map[string][]byte{}}
	for k, v := range labels {
		s.Labels[k] = v
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestArgoCDCluster: what an Argo CD cluster Secret declares becomes a
// cluster whose client configuration reaches its server as its user, or
// an error saying why it is no cluster.
func TestArgoCDCluster(t *testing.T) {
	type want struct {
		Name, Host, Token, User, Password, ServerName string
		Insecure                                      bool
		CA, Cert, Key                                 string
		Exec                                          string
		Labels                                        map[string]string
	}
	tests := []struct {
		name    string
		secret  *corev1.Secret
		want    want
		wantErr string
	}{{
		name: "a bearer token and a CA, named by data.name, labelled by the Secret",
		secret: argoSecret("cluster-prod-eu-123", map[string]string{"tier": "prod"}, map[string]string{
			"name": "prod-eu", "server": "https://prod-eu.example.com:6443",
			"config": `{"bearerToken":"tok","tlsClientConfig":{"caData":"` + b64("CA PEM") + `","serverName":"api.prod-eu"}}`}),
		want: want{Name: "prod-eu", Host: "https://prod-eu.example.com:6443", Token: "tok", CA: "CA PEM", ServerName: "api.prod-eu",
			Labels: map[string]string{"tier": "prod", discovery.LabelSecretType: discovery.SecretTypeCluster}},
	}, {
		name: "a user and password, TLS unverified, named by the Secret",
		secret: argoSecret("staging", nil, map[string]string{"server": "https://staging.example.com",
			"config": `{"username":"admin","password":"pw","tlsClientConfig":{"insecure":true}}`}),
		want: want{Name: "staging", Host: "https://staging.example.com", User: "admin", Password: "pw", Insecure: true,
			Labels: map[string]string{discovery.LabelSecretType: discovery.SecretTypeCluster}},
	}, {
		name: "client certificates and an exec plugin",
		secret: argoSecret("edge", nil, map[string]string{"name": "edge-1", "server": "https://edge.example.com",
			"config": `{"tlsClientConfig":{"certData":"` + b64("CERT") + `","keyData":"` + b64("KEY") + `"},` +
				`"execProviderConfig":{"command":"get-token","args":["--cluster","edge"],"env":{"B":"2","A":"1"},"apiVersion":"client.authentication.k8s.io/v1beta1"}}`}),
		want: want{Name: "edge-1", Host: "https://edge.example.com", Cert: "CERT", Key: "KEY", Exec: "get-token --cluster edge A=1 B=2",
			Labels: map[string]string{discovery.LabelSecretType: discovery.SecretTypeCluster}},
	}, {
		name:    "a name that is no DNS label",
		secret:  argoSecret("x", nil, map[string]string{"name": "Prod_EU", "server": "https://x"}),
		wantErr: `fleet.discovery.argocd: Secret argocd/x: cluster name "Prod_EU" is not a DNS label`,
	}, {
		name:    "no server",
		secret:  argoSecret("x", nil, map[string]string{"name": "x"}),
		wantErr: "fleet.discovery.argocd: Secret argocd/x: data.server is empty",
	}, {
		name:    "AWS IAM authentication",
		secret:  argoSecret("eks", nil, map[string]string{"server": "https://eks", "config": `{"awsAuthConfig":{"clusterName":"eks"}}`}),
		wantErr: "data.config.awsAuthConfig is not supported",
	}, {
		name:    "a config that is no JSON",
		secret:  argoSecret("x", nil, map[string]string{"server": "https://x", "config": "token: t"}),
		wantErr: "fleet.discovery.argocd: Secret argocd/x: data.config:",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := discovery.ArgoCDCluster(tt.secret)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ArgoCDCluster = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Source != "fleet.discovery.argocd: Secret argocd/"+tt.secret.Name {
				t.Errorf("source %q", c.Source)
			}
			rc, err := kube.RESTConfigFromKubeconfig(c.KubeconfigData)
			if err != nil {
				t.Fatal(err)
			}
			got := want{Name: c.Name, Host: rc.Host, Token: rc.BearerToken, User: rc.Username, Password: rc.Password,
				ServerName: rc.ServerName, Insecure: rc.Insecure, CA: string(rc.CAData), Cert: string(rc.CertData), Key: string(rc.KeyData),
				Exec: execOf(rc), Labels: c.Labels}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cluster (-want +got):\n%s", diff)
			}
			again, _ := discovery.ArgoCDCluster(tt.secret)
			if string(again.KubeconfigData) != string(c.KubeconfigData) {
				t.Error("the same Secret made another kubeconfig: its client would be made anew at every reload")
			}
		})
	}
}

// execOf is the exec plugin's command line and environment, "" without one.
func execOf(rc *rest.Config) string {
	e := rc.ExecProvider
	if e == nil {
		return ""
	}
	parts := append([]string{e.Command}, e.Args...)
	for _, v := range e.Env {
		parts = append(parts, v.Name+"="+v.Value)
	}
	return strings.Join(parts, " ")
}
