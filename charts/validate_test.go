package charts

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// clusterScoped are the kinds the chart renders without a namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"SecurityContextConstraints": true,
}

// validator checks rendered objects offline, kubeconform-style, against
// the API of the pinned Kubernetes (k8s.io/api, client-go and
// apiextensions-apiserver v0.37.2, i.e. 1.37.2):
//   - a strict decode into the Go type of the kind through the client-go
//     scheme (unknown and duplicate fields, wrong types, an apiVersion or
//     kind the version does not serve all fail);
//   - the structural OpenAPI schema of that version
//     (applyconfigurations' type converter, generated from the
//     Kubernetes OpenAPI: a field not declared in the schema, a wrong type
//     or an unknown list/map shape fails);
//   - the API server's ObjectMeta validation (name, namespace, label and
//     annotation syntax), and namespace set exactly on namespaced kinds.
//
// CustomResourceDefinitions go the same way with apiextensions' scheme and
// schema. PodMonitor and PrometheusRule (the Prometheus Operator's, not in
// go.mod) are strictly decoded into the minimal types below, which name
// only the fields of monitoring.coreos.com/v1 the chart uses.
type validator struct {
	builtin, crd     runtime.Decoder
	builtinTC, crdTC managedfields.TypeConverter
}

func newValidator(t *testing.T) *validator {
	t.Helper()
	crdScheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(crdScheme); err != nil {
		t.Fatal(err)
	}
	strict := json.SerializerOptions{Yaml: true, Strict: true}
	return &validator{
		builtin:   json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, strict),
		crd:       json.NewSerializerWithOptions(json.DefaultMetaFactory, crdScheme, crdScheme, strict),
		builtinTC: applyconfigurations.NewTypeConverter(scheme.Scheme),
		crdTC:     apiextensionsac.NewTypeConverter(crdScheme),
	}
}

func (v *validator) validate(obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	switch u.GroupVersionKind().Group {
	case "monitoring.coreos.com":
		return validateMonitoring(u.GetKind(), b)
	case "cert-manager.io":
		return validateCertificate(u.GetKind(), b)
	case "security.openshift.io":
		return validateSCC(u.GetKind(), b)
	case "apiextensions.k8s.io":
		return v.validateWith(v.crd, v.crdTC, u, b)
	default:
		return v.validateWith(v.builtin, v.builtinTC, u, b)
	}
}

func (v *validator) validateWith(dec runtime.Decoder, tc managedfields.TypeConverter, u *unstructured.Unstructured, b []byte) error {
	typed, gvk, err := dec.Decode(b, nil, nil)
	if err != nil {
		return fmt.Errorf("strict decode: %w", err)
	}
	if gvk.Kind != u.GetKind() {
		return fmt.Errorf("decoded as %s", gvk)
	}
	if _, err := tc.ObjectToTyped(u); err != nil {
		return fmt.Errorf("OpenAPI schema: %w", err)
	}
	accessor, ok := typed.(metav1.ObjectMetaAccessor)
	if !ok {
		return fmt.Errorf("%T has no ObjectMeta", typed)
	}
	return objectMeta(u.GetKind(), accessor.GetObjectMeta().(*metav1.ObjectMeta))
}

func objectMeta(kind string, md *metav1.ObjectMeta) error {
	errs := apimachineryvalidation.ValidateObjectMeta(md, !clusterScoped[kind], apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if clusterScoped[kind] && md.Namespace != "" {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "namespace"), "cluster-scoped kind"))
	}
	return errs.ToAggregate()
}

// The fields of monitoring.coreos.com/v1 PodMonitor and PrometheusRule the
// chart renders, as the Prometheus Operator's types name them.
type (
	podMonitor struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			ScrapeClass         string               `json:"scrapeClass,omitempty"`
			Selector            metav1.LabelSelector `json:"selector"`
			PodMetricsEndpoints []struct {
				Port          string `json:"port"`
				Scheme        string `json:"scheme"`
				Interval      string `json:"interval"`
				HonorLabels   bool   `json:"honorLabels"`
				Authorization *struct {
					Type        string `json:"type"`
					Credentials struct {
						Name string `json:"name"`
						Key  string `json:"key"`
					} `json:"credentials"`
				} `json:"authorization,omitempty"`
				TLSConfig struct {
					InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
					CA                 *struct {
						Secret struct {
							Name string `json:"name"`
							Key  string `json:"key"`
						} `json:"secret"`
					} `json:"ca,omitempty"`
					ServerName string `json:"serverName,omitempty"`
				} `json:"tlsConfig"`
				Relabelings []struct {
					SourceLabels []string `json:"sourceLabels"`
					Regex        string   `json:"regex"`
					TargetLabel  string   `json:"targetLabel"`
				} `json:"relabelings"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	// certificate is cert-manager.io/v1 Certificate, the fields the chart
	// renders (metrics-tls.yaml).
	certificate struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
			Usages     []string `json:"usages"`
			IssuerRef  struct {
				Group string `json:"group"`
				Kind  string `json:"kind"`
				Name  string `json:"name"`
			} `json:"issuerRef"`
		} `json:"spec"`
	}
	prometheusRule struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Groups []struct {
				Name     string `json:"name"`
				Interval string `json:"interval,omitempty"`
				Rules    []struct {
					Record      string            `json:"record,omitempty"`
					Alert       string            `json:"alert,omitempty"`
					Expr        string            `json:"expr"`
					For         string            `json:"for,omitempty"`
					Labels      map[string]string `json:"labels,omitempty"`
					Annotations map[string]string `json:"annotations,omitempty"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
)

func validateMonitoring(kind string, b []byte) error {
	var md *metav1.ObjectMeta
	switch kind {
	case "PodMonitor":
		var pm podMonitor
		if err := yaml.UnmarshalStrict(b, &pm); err != nil {
			return fmt.Errorf("strict decode: %w", err)
		}
		md = &pm.ObjectMeta
	case "PrometheusRule":
		var pr prometheusRule
		if err := yaml.UnmarshalStrict(b, &pr); err != nil {
			return fmt.Errorf("strict decode: %w", err)
		}
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				if (r.Record == "") == (r.Alert == "") || r.Expr == "" {
					return fmt.Errorf("group %s: a rule needs exactly one of record and alert, and expr", g.Name)
				}
			}
		}
		md = &pr.ObjectMeta
	default:
		return fmt.Errorf("kind %s of monitoring.coreos.com is not known to this test", kind)
	}
	return objectMeta(kind, md)
}

func validateCertificate(kind string, b []byte) error {
	if kind != "Certificate" {
		return fmt.Errorf("kind %s of cert-manager.io is not known to this test", kind)
	}
	var c certificate
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return fmt.Errorf("strict decode: %w", err)
	}
	if c.Spec.SecretName == "" || len(c.Spec.DNSNames) == 0 || c.Spec.IssuerRef.Name == "" {
		return fmt.Errorf("certificate without secretName, dnsNames or issuerRef.name")
	}
	if k := c.Spec.IssuerRef.Kind; k != "Issuer" && k != "ClusterIssuer" {
		return fmt.Errorf("issuerRef.kind %q", k)
	}
	return objectMeta(kind, &c.ObjectMeta)
}

func validateSCC(kind string, b []byte) error {
	if kind != "SecurityContextConstraints" {
		return fmt.Errorf("kind %s of security.openshift.io is not known to this test", kind)
	}
	var s scc
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return fmt.Errorf("strict decode: %w", err)
	}
	if s.RunAsUser.Type == "" || s.SELinuxContext.Type == "" || s.FSGroup.Type == "" || s.SupplementalGroups.Type == "" {
		return fmt.Errorf("runAsUser, seLinuxContext, fsGroup and supplementalGroups need a type")
	}
	md := &metav1.ObjectMeta{Name: s.Metadata.Name, Labels: s.Metadata.Labels, Annotations: s.Metadata.Annotations}
	return objectMeta(kind, md)
}

// TestRenderedObjectsValidate validates every object the chart renders
// (CRDs and hooks included) with the defaults, the config/default layout,
// and testdata/everything-on.yaml (every value set, monitoring on); see
// validator for what is checked.
func TestRenderedObjectsValidate(t *testing.T) {
	v := newValidator(t)
	for name, args := range map[string][]string{
		"defaults":           {"-n", "tier"},
		"config/default":     configDefaultLayout,
		"everything-on.yaml": {"-n", "default", "-f", "testdata/everything-on.yaml"},
		"metrics TLS": {"-n", "tier", "--set", "monitoring.podMonitor.enabled=true",
			"--set", "metrics.tls.certManager.issuerName=ca", "--set", "monitoring.podMonitor.scrapeClass=sa-token",
			"--set", "monitoring.podMonitor.prometheusServiceAccount.name=prometheus",
			"--set", "monitoring.podMonitor.prometheusServiceAccount.namespace=monitoring"},
	} {
		objs := objects(t, "helm template", helm(t, append([]string{"template", "rel", chartDir, "--include-crds"}, args...)...))
		kinds := map[string]int{}
		for key, obj := range objs {
			kinds[fmt.Sprint(obj["kind"])]++
			if err := v.validate(obj); err != nil {
				t.Errorf("%s: %s: %v", name, key, err)
			}
		}
		t.Logf("%s: %d objects validated: %v", name, len(objs), kinds)
		if name == "everything-on.yaml" && (kinds["PodMonitor"] != 1 || kinds["PrometheusRule"] != 1 || kinds["Namespace"] != 1 ||
			kinds["NetworkPolicy"] != 1 || kinds["SecurityContextConstraints"] != 1) {
			t.Errorf("%s rendered kinds %v, want the PodMonitor, PrometheusRule, Namespace, NetworkPolicy and SCC too", name, kinds)
		}
	}
}

// TestValidatorRefuses: the validator is not a no-op; each broken object
// is refused for the reason named.
func TestValidatorRefuses(t *testing.T) {
	v := newValidator(t)
	objs := objects(t, "helm template", helm(t, "template", "rel", chartDir, "-n", "tier", "--include-crds",
		"--set", "monitoring.podMonitor.enabled=true", "--set", "monitoring.podMonitor.credentials=LongLivedTokenSecret", "--set", "monitoring.prometheusRule.enabled=true"))
	get := func(key string) map[string]any {
		obj, ok := objs[key]
		if !ok {
			t.Fatalf("no %s in %v", key, keys(objs))
		}
		b, _ := yaml.Marshal(obj)
		var c map[string]any
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	pod := func(o map[string]any) map[string]any {
		return o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	}
	for what, c := range map[string]struct {
		obj  map[string]any
		says string
	}{
		"an unknown pod field": {func() map[string]any {
			o := get("DaemonSet/tier/latencytier-agent")
			pod(o)["hostPid"] = true
			return o
		}(), "unknown field"},
		// Strict decoding accepts this; the OpenAPI schema's list-map keys do not.
		"two containers of one name": {func() map[string]any {
			o := get("DaemonSet/tier/latencytier-agent")
			cs := pod(o)["containers"].([]any)
			pod(o)["containers"] = append(cs, cs[0])
			return o
		}(), "OpenAPI schema"},
		"a string where an integer goes": {func() map[string]any {
			o := get("Deployment/tier/latencytier-manager")
			o["spec"].(map[string]any)["replicas"] = "one"
			return o
		}(), "replicas"},
		"a kind the version does not serve": {func() map[string]any {
			o := get("ValidatingAdmissionPolicy/latencytier-agent-own-node")
			o["apiVersion"] = "admissionregistration.k8s.io/v2"
			return o
		}(), "no kind"},
		"an invalid label value": {func() map[string]any {
			o := get("ConfigMap/tier/latencytier-sysctls")
			o["metadata"].(map[string]any)["labels"].(map[string]any)["app.kubernetes.io/version"] = "not a value!"
			return o
		}(), "metadata.labels"},
		"a namespaced kind without a namespace": {func() map[string]any {
			o := get("ServiceAccount/tier/latencytier-agent")
			delete(o["metadata"].(map[string]any), "namespace")
			return o
		}(), "metadata.namespace"},
		"an unknown CRD field": {func() map[string]any {
			o := get("CustomResourceDefinition/latencyprofiles.tuning.latencytier.io")
			o["spec"].(map[string]any)["scopes"] = "Cluster"
			return o
		}(), "unknown field"},
		"an unknown PodMonitor field": {func() map[string]any {
			o := get("PodMonitor/tier/latencytier")
			o["spec"].(map[string]any)["podMetricEndpoints"] = []any{}
			return o
		}(), "unknown field"},
		"a rule without expr": {func() map[string]any {
			o := get("PrometheusRule/tier/latencytier")
			o["spec"].(map[string]any)["groups"].([]any)[0].(map[string]any)["rules"].([]any)[0].(map[string]any)["expr"] = ""
			return o
		}(), "expr"},
	} {
		err := v.validate(c.obj)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want an error saying %q", what, err, c.says)
		}
	}
}
