package server_test

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestOpenAPIDocumentHasEveryRoute: the committed OpenAPI document
// (openapi/, make generate) describes exactly the REST routes the
// google.api.http rules of the service declare, which podsyncd serves.
// make check-generate fails on any drift too; this says which route.
func TestOpenAPIDocumentHasEveryRoute(t *testing.T) {
	b, err := os.ReadFile("../openapi/podsync.swagger.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(documented)

	var declared []string
	methods := podsyncv1.File_podsync_v1_pod_sync_service_proto.Services().ByName("PodSyncService").Methods()
	for i := range methods.Len() {
		opts, ok := methods.Get(i).Options().(*descriptorpb.MethodOptions)
		if !ok || !proto.HasExtension(opts, annotations.E_Http) {
			continue
		}
		rule, ok := proto.GetExtension(opts, annotations.E_Http).(*annotations.HttpRule)
		if !ok {
			t.Fatalf("%s: the google.api.http option is a %T", methods.Get(i).FullName(), rule)
		}
		for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
			switch p := r.GetPattern().(type) {
			case *annotations.HttpRule_Get:
				declared = append(declared, "get "+p.Get)
			case *annotations.HttpRule_Post:
				declared = append(declared, "post "+p.Post)
			case *annotations.HttpRule_Delete:
				declared = append(declared, "delete "+p.Delete)
			case *annotations.HttpRule_Put:
				declared = append(declared, "put "+p.Put)
			case *annotations.HttpRule_Patch:
				declared = append(declared, "patch "+p.Patch)
			default:
				t.Fatalf("%s: a pattern of kind %T", methods.Get(i).FullName(), p)
			}
		}
	}
	slices.Sort(declared)
	if len(declared) == 0 {
		t.Fatal("the service declares no route")
	}
	if diff := cmp.Diff(declared, documented); diff != "" {
		t.Errorf("openapi/podsync.swagger.json is not the routes of the protos (-declared +documented); run make generate:\n%s", diff)
	}
}
