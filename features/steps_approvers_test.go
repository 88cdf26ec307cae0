package features

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Approvers are people (#31 item 4): a wave's approvals name who may
// approve and how many; automation never counts, nor, with separation of
// duties, whoever pushed the version (as the registry's own notification
// names them). People are API tokens with groups here, and people signed
// in through the OpenID provider (steps_sso_test.go), whose subject is
// opaque and whose username (preferred_username) is the registry login.

// approversWorld is what the approvers' steps configure: the API tokens'
// groups and those marked automation (server.apiTokens[].groups,
// .automation).
type approversWorld struct {
	groups     map[string][]string
	automation map[string]bool
}

func (s *scenario) registerApproverSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the API tokens "([^"]*)" are people in group "([^"]*)"$`, s.peopleInGroup)
	sc.Step(`^the API token "([^"]*)" is automation in group "([^"]*)"$`, s.automationInGroup)
	sc.Step(`^wave (\d+) needs (\d+) approvals? from group "([^"]*)" with separation of duties$`, s.waveNeedsApprovalsFrom)
	sc.Step(`^the rollout of "([^"]*)" was pushed by "([^"]*)", as the API and `+"`flotilla describe rollout`"+` say$`, s.pushedByIs)
	sc.Step(`^"([^"]*)" approves wave (\d+) of the rollout of "([^"]*)" and is refused: "([^"]*)"$`, s.approvalRefused)
	sc.Step(`^"([^"]*)" approves wave (\d+) of the rollout of "([^"]*)" with the reason "([^"]*)", which releases it$`, s.approvalReleases)
	sc.Step(`^the rollout of "([^"]*)" waits: "([^"]*)"$`, s.rolloutWaits)
	sc.Step("^`flotilla get audit -o json` gives the reasons of the refusals:$", s.auditRefusals)
	sc.Step(`^"([^"]*)" approves the canary in cluster "([^"]*)" of the rollout of "([^"]*)"$`, s.verdictGiven)
	sc.Step(`^"([^"]*)" approves the canary in cluster "([^"]*)" of the rollout of "([^"]*)" and is refused: "([^"]*)"$`, s.verdictRefused)
	sc.Step(`^the canary in cluster "([^"]*)" still waits for promotion (\d+) seconds later, its primary running "([^"]*)"$`, s.canaryStillWaits)
	sc.Step("^`flotilla get audit -o json` lists the manual verdicts, newest first:$", s.auditVerdicts)
	sc.Step("^the ID token `flotilla login --sso` keeps names \"([^\"]*)\" by an opaque subject, with the preferred_username \"([^\"]*)\"$", s.ssoTokenNames)
	sc.Step("^\"([^\"]*)\" approves wave (\\d+) of the rollout of \"([^\"]*)\" with the ID token `flotilla login --sso` keeps, and is refused 403: \"([^\"]*)\"$", s.ssoApprovalRefused)
	sc.Step("^`flotilla get audit -o json` records the refusal of \"([^\"]*)\" with the username \"([^\"]*)\"$", s.auditRefusedUsername)
}

func (s *scenario) approversWorld() *approversWorld {
	if s.w.approvers == nil {
		s.w.approvers = &approversWorld{groups: map[string][]string{}, automation: map[string]bool{}}
	}
	return s.w.approvers
}

func (s *scenario) peopleInGroup(names, group string) error {
	for _, n := range strings.Split(names, ",") {
		if err := s.namedToken(n); err != nil {
			return err
		}
		a := s.approversWorld()
		a.groups[n] = append(a.groups[n], group)
	}
	return nil
}

func (s *scenario) automationInGroup(name, group string) error {
	if err := s.peopleInGroup(name, group); err != nil {
		return err
	}
	s.approversWorld().automation[name] = true
	return nil
}

func (s *scenario) waveNeedsApprovalsFrom(wave, n int, group string) error {
	s.wavePolicy(wave, "approvals", map[string]any{"required": n, "from": []string{"group:" + group}, "separationOfDuties": true})
	return nil
}

// configure gives the tokens their groups and automation, and every
// principal the role admin (rbac.defaultRole): groups need a policy.
func (a *approversWorld) configure(cfg map[string]any) {
	server := cfg["server"].(map[string]any)
	tokens, _ := server["apiTokens"].([]map[string]any)
	for _, t := range tokens {
		name := t["name"].(string)
		if g := a.groups[name]; len(g) > 0 {
			t["groups"] = g
		}
		if a.automation[name] {
			t["automation"] = true
		}
	}
	cfg["rbac"] = map[string]any{"defaultRole": "admin"}
}

func (s *scenario) pushedByIs(ctx context.Context, version, who string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var ro struct{ PushedBy string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.PushedBy != who {
		return fmt.Errorf("the API says the rollout of %s was pushed by %q, want %q", version, ro.PushedBy, who)
	}
	out, err := s.flotillaCLI(ctx, "describe", "rollout", id, "--token", s.w.apiToken)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Pushed by:    "+who+"\n") {
		return fmt.Errorf("flotilla describe rollout does not say it was pushed by %s:\n%s", who, out)
	}
	return nil
}

// approvalRefused sends the approval with the CLI as who (its token;
// "default" is server.apiToken) and wants it refused, saying why.
func (s *scenario) approvalRefused(ctx context.Context, who string, wave int, version, why string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	tok, err := s.tokenOf(who)
	if err != nil {
		return err
	}
	return s.send(who, "approve", "", func() error {
		out, err := s.flotillaCLI(ctx, "approve", id, "--wave", fmt.Sprint(wave), "--token", tok, "--reason", "features")
		if err == nil {
			return fmt.Errorf("flotilla approve --wave as %s succeeded (%q), want it refused: %s", who, out, why)
		}
		// The CLI prints the API's reason, not its status: the 403 itself
		// is checked by pkg/api's TestApproversArePeople.
		if !strings.Contains(err.Error(), why) {
			return fmt.Errorf("flotilla approve --wave as %s: %v, want it refused: %q", who, err, why)
		}
		return nil
	})
}

func (s *scenario) approvalReleases(ctx context.Context, who string, wave int, version, reason string) error {
	s.released(time.Now())
	return s.auditApprove(ctx, who, wave, version, reason)
}

func (s *scenario) rolloutWaits(ctx context.Context, version, want string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var ro struct{ Waiting string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.Waiting != want {
		return fmt.Errorf("the rollout of %s waits: %q, want %q", version, ro.Waiting, want)
	}
	return nil
}

// auditRefusals reads the refused records' reasons (the table's columns
// are name and why) from `flotilla get audit -o json`, newest first.
func (s *scenario) auditRefusals(ctx context.Context, table *godog.Table) error {
	out, err := s.flotillaCLI(ctx, "get", "audit", "-o", "json", "--token", s.w.apiToken)
	if err != nil {
		return err
	}
	var page struct {
		Records []struct {
			Principal struct {
				Name       string
				Automation bool
			}
			Decision, Why string
		}
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		return fmt.Errorf("reading flotilla get audit -o json: %w:\n%s", err, out)
	}
	var got, want []string
	for _, r := range page.Records {
		if r.Decision == "refused" {
			got = append(got, r.Principal.Name+": "+r.Why)
		}
	}
	for _, r := range table.Rows[1:] {
		want = append(want, strings.TrimSpace(r.Cells[0].Value)+": "+strings.TrimSpace(r.Cells[1].Value))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("the refused records say %q, want %q:\n%s", got, want, out)
	}
	return nil
}

// tokenOf is the secret of the API token named who: a step's named
// token, "default" (server.apiToken), or one `flotilla token create` made.
func (s *scenario) tokenOf(who string) (string, error) {
	tok, ok := s.w.approverTokens[who]
	if who == "default" {
		tok, ok = s.w.apiToken, true
	}
	if created, made := s.w.createdTokens[who]; !ok && made { // flotilla token create's
		tok, ok = created, true
	}
	if !ok {
		return "", fmt.Errorf("no API token named %q: a step must make it", who)
	}
	return tok, nil
}

// verdict runs `flotilla approve ROLLOUT --cluster C` as who (a manual
// validation's verdict promoting the canary there): its output, or its
// error.
func (s *scenario) verdict(ctx context.Context, who, cluster, version string) (string, error) {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return "", err
	}
	tok, err := s.tokenOf(who)
	if err != nil {
		return "", err
	}
	return s.flotillaCLI(ctx, "approve", id, "--cluster", cluster, "--token", tok, "--reason", "features")
}

func (s *scenario) verdictGiven(ctx context.Context, who, cluster, version string) error {
	out, err := s.verdict(ctx, who, cluster, version)
	if err != nil {
		return fmt.Errorf("flotilla approve --cluster %s as %s: %w", cluster, who, err)
	}
	if !strings.Contains(out, "approved for cluster "+cluster) {
		return fmt.Errorf("flotilla approve --cluster %s as %s printed %q", cluster, who, out)
	}
	return nil
}

func (s *scenario) verdictRefused(ctx context.Context, who, cluster, version, why string) error {
	out, err := s.verdict(ctx, who, cluster, version)
	if err == nil {
		return fmt.Errorf("flotilla approve --cluster %s as %s succeeded (%q), want it refused: %s", cluster, who, out, why)
	}
	// The CLI prints the API's reason; the 403 itself is checked by
	// pkg/api's TestVerdictsAreApprovals.
	if !strings.Contains(err.Error(), why) {
		return fmt.Errorf("flotilla approve --cluster %s as %s: %v, want it refused: %q", cluster, who, err, why)
	}
	return nil
}

// canaryStillWaits watches the cluster's Canary for the given seconds:
// Flagger (interval 1 s) asks the confirm-promotion gate all along, so a
// verdict kept would promote it at once; it must stay WaitingPromotion,
// its primary on version.
func (s *scenario) canaryStillWaits(ctx context.Context, cluster string, seconds int, version string) error {
	c, err := s.waveCluster(cluster)
	if err != nil {
		return err
	}
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	for {
		cd, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cd.Status.Phase != flaggerv1.CanaryPhaseWaitingPromotion {
			return fmt.Errorf("the canary in %s is %s, want it still waiting for promotion", cluster, cd.Status.Phase)
		}
		if err := s.primaryInRuns(ctx, cluster, version); err != nil {
			return err
		}
		if time.Now().After(end) {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// auditVerdicts reads the audit records of the clusters' manual verdicts
// (action approve with a cluster) from `flotilla get audit -o json`,
// newest first: the table's columns are name, cluster, detail (the
// verdict), decision and why.
func (s *scenario) auditVerdicts(ctx context.Context, table *godog.Table) error {
	var want [][]string
	for _, r := range table.Rows[1:] {
		var row []string
		for _, c := range r.Cells {
			row = append(row, strings.TrimSpace(c.Value))
		}
		want = append(want, row)
	}
	out, err := s.flotillaCLI(ctx, "get", "audit", "-o", "json", "--token", s.w.apiToken)
	if err != nil {
		return err
	}
	var page struct {
		Records []struct {
			Principal                              struct{ Name string }
			Action, Cluster, Detail, Decision, Why string
		}
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		return fmt.Errorf("reading flotilla get audit -o json: %w:\n%s", err, out)
	}
	var got [][]string
	for _, r := range page.Records {
		if r.Action == "approve" && r.Cluster != "" {
			got = append(got, []string{r.Principal.Name, r.Cluster, r.Detail, r.Decision, r.Why})
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("the manual verdicts' audit records (-want +got):\n%s\n%s", diff, out)
	}
	return nil
}

// ssoIDToken is the ID token the CLI keeps (`flotilla login --sso`) and
// its claims, read without verifying it: the provider made it, flotilla
// verifies it.
func (s *scenario) ssoIDToken() (string, map[string]any, error) {
	l, err := s.cliLogin()
	if err != nil {
		return "", nil, err
	}
	raw, _ := l["idToken"].(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", nil, fmt.Errorf("the CLI keeps no ID token (a JWT): %q", raw)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", nil, fmt.Errorf("decoding the ID token's claims: %w", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", nil, fmt.Errorf("decoding the ID token's claims: %w", err)
	}
	return raw, claims, nil
}

// ssoTokenNames checks what the provider says of the person, as
// Keycloak, Okta or Google would: an opaque sub, which is neither the
// email nor the login name, the email, and the login name as
// preferred_username.
func (s *scenario) ssoTokenNames(email, username string) error {
	_, claims, err := s.ssoIDToken()
	if err != nil {
		return err
	}
	sub, _ := claims["sub"].(string)
	if claims["email"] != email || claims["preferred_username"] != username || sub == "" ||
		strings.Contains(strings.ToLower(sub), username) || sub == email {
		return fmt.Errorf("the ID token's claims are %v, want the email %s, the preferred_username %s and an opaque sub", claims, email, username)
	}
	return nil
}

// ssoApprovalRefused sends the approval of the wave as the CLI does, with
// the ID token it keeps as a bearer token, and wants it refused 403 with
// why.
func (s *scenario) ssoApprovalRefused(ctx context.Context, who string, wave int, version, why string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	raw, _, err := s.ssoIDToken()
	if err != nil {
		return err
	}
	h := http.Header{"Authorization": {"Bearer " + raw}, "Content-Type": {"application/json"}}
	return s.send(who, "approve", "", func() error {
		a, err := s.call(ctx, http.MethodPost, fmt.Sprintf("/api/v1/rollouts/%s/waves/%d/approval", id, wave), h, []byte(`{"reason":"features"}`))
		if err != nil {
			return err
		}
		var body struct{ Error string }
		_ = json.Unmarshal([]byte(a.body), &body)
		if a.status != http.StatusForbidden || body.Error != why {
			return fmt.Errorf("%s's approval of wave %d answered %d %s, want 403 %q", who, wave, a.status, a.body, why)
		}
		return nil
	})
}

// auditRefusedUsername reads the refused records of name in `flotilla
// get audit -o json`: each names the person's username too.
func (s *scenario) auditRefusedUsername(ctx context.Context, name, username string) error {
	out, err := s.flotillaCLI(ctx, "get", "audit", "-o", "json", "--token", s.w.apiToken)
	if err != nil {
		return err
	}
	var page struct {
		Records []struct {
			Principal struct{ Name, Username, Via string }
			Decision  string
		}
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		return fmt.Errorf("reading flotilla get audit -o json: %w:\n%s", err, out)
	}
	n := 0
	for _, r := range page.Records {
		if r.Decision != "refused" || r.Principal.Name != name {
			continue
		}
		if n++; r.Principal.Username != username {
			return fmt.Errorf("the refused record of %s names the username %q, want %q:\n%s", name, r.Principal.Username, username, out)
		}
	}
	if n == 0 {
		return fmt.Errorf("flotilla get audit -o json has no refused record of %s:\n%s", name, out)
	}
	return nil
}
