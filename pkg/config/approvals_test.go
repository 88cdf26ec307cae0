package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestApprovals(t *testing.T) {
	dir := testDir(t)
	fleet := func(approvals string) sections {
		return sections{fleet: "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1], approvals: " + approvals + "}]}\n"}
	}
	tests := []struct {
		name      string
		doc       sections
		want      *Approvals
		problems  []Problem
		parseFail string
	}{{
		name: "a number: that many people",
		doc:  fleet("2"),
		want: &Approvals{Required: 2},
	}, {
		name: "zero: none",
		doc:  fleet("0"),
		want: &Approvals{},
	}, {
		name: "who, and separation of duties",
		doc:  fleet("{required: 2, from: [group:release-managers, user:alice], separationOfDuties: true}"),
		want: &Approvals{Required: 2, From: []string{"group:release-managers", "user:alice"}, SeparationOfDuties: true, Mapping: true},
	}, {
		name: "separation of duties from anyone",
		doc:  fleet("{required: 1, separationOfDuties: true}"),
		want: &Approvals{Required: 1, SeparationOfDuties: true, Mapping: true},
	}, {
		name:     "a number out of range",
		doc:      fleet("11"),
		problems: []Problem{{"fleet.waves[0].approvals", "11 is out of range: want 0 to 10 distinct approvers"}},
	}, {
		name:     "required missing or below one",
		doc:      fleet("{from: [group:release-managers]}"),
		problems: []Problem{{"fleet.waves[0].approvals.required", "0 is out of range: want 1 to 10 distinct approvers (or write approvals: 0 for none)"}},
	}, {
		name: "subjects",
		doc:  fleet("{required: 1, from: [team:sre, 'group:', 'user:a b', token:ci, user:bob, user:bob]}"),
		problems: []Problem{
			{"fleet.waves[0].approvals.from[0]", `"team:sre": want group:<name> or user:<name>`},
			{"fleet.waves[0].approvals.from[1]", `"group:": want a group name without spaces or commas after group:`},
			{"fleet.waves[0].approvals.from[2]", `"user:a b": want a user name without spaces or commas after user:`},
			{"fleet.waves[0].approvals.from[3]", `"token:ci": want group:<name> or user:<name>`},
			{"fleet.waves[0].approvals.from[5]", `"user:bob" is listed twice`},
		},
	}, {
		name:     "fewer users than required",
		doc:      fleet("{required: 3, from: [user:alice, user:bob]}"),
		problems: []Problem{{"fleet.waves[0].approvals.from", "names 2 users and no group: 3 distinct approvals can never be given"}},
	}, {
		name:      "an unknown field",
		doc:       fleet("{required: 1, separationOfDuty: true}"),
		parseFail: "parsing config: line 6: fleet.waves[0].approvals: unknown field \"separationOfDuty\"",
	}, {
		name:      "neither a number nor a mapping",
		doc:       fleet("[alice]"),
		parseFail: "parsing config: line 6: fleet.waves[0].approvals: want a number of approvers or {required, from, separationOfDuties}, got a list",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc.doc()), dir)
			var verr *ValidationError
			switch {
			case tt.parseFail != "":
				if err == nil || err.Error() != tt.parseFail {
					t.Fatalf("Parse: %v, want %s", err, tt.parseFail)
				}
				return
			case errors.As(err, &verr):
				if diff := cmp.Diff(tt.problems, verr.Problems); diff != "" {
					t.Fatalf("problems (-want +got):\n%s", diff)
				}
				return
			case err != nil:
				t.Fatalf("Parse: %v", err)
			case tt.problems != nil:
				t.Fatalf("Parse: no problem, want %v", tt.problems)
			}
			if diff := cmp.Diff(tt.want, c.Fleet.Waves[0].Approvals); diff != "" {
				t.Errorf("approvals (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAutomationTokens(t *testing.T) {
	s := Server{APIToken: &Secret{Env: "X"}, APITokenValue: "x", APITokens: []APIToken{{Name: "ci", Automation: true}, {Name: "alice"}}}
	if diff := cmp.Diff([]string{DefaultTokenName, "ci"}, s.AutomationTokens()); diff != "" {
		t.Errorf("automation tokens (-want +got):\n%s", diff)
	}
}
