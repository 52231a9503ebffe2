// Command check validates Kubernetes manifests offline against the API's own Go types
// (k8s.io/api): every document must decode strictly into the type its apiVersion and kind
// name (no unknown or misspelled field, every value of the right type, quantities that
// parse), and the rules below, which the API server or the kubelet would enforce, must hold.
// It is strait's check of deploy/ (scripts/deploy-check); it needs no cluster.
//
// Usage: check FILE...  (each a YAML stream; "-" reads stdin)
package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: check FILE... (YAML manifests; - for stdin)")
		os.Exit(2)
	}
	failed := 0
	for _, path := range os.Args[1:] {
		var data []byte
		var err error
		if path == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(path)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed++
			continue
		}
		for i, doc := range separator.Split(string(data), -1) {
			if isEmpty(doc) {
				continue
			}
			kind, err := check([]byte(doc))
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s, document %d (%s): %v\n", path, i+1, kind, err)
				failed++
				continue
			}
			fmt.Printf("%s, document %d: %s valid\n", path, i+1, kind)
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "%d invalid document(s)\n", failed)
		os.Exit(1)
	}
}

// isEmpty: nothing but blank lines and comments.
func isEmpty(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

func check(doc []byte) (string, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return "?", fmt.Errorf("not YAML: %w", err)
	}
	kind := head.APIVersion + " " + head.Kind
	switch kind {
	case "v1 ConfigMap":
		var o corev1.ConfigMap
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			return kind, err
		}
		return kind, name("metadata.name", o.Name)
	case "v1 Secret":
		var o corev1.Secret
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			return kind, err
		}
		return kind, name("metadata.name", o.Name)
	case "v1 ServiceAccount":
		var o corev1.ServiceAccount
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			return kind, err
		}
		return kind, name("metadata.name", o.Name)
	case "v1 Service":
		var o corev1.Service
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			return kind, err
		}
		return kind, service(&o)
	case "networking.k8s.io/v1 NetworkPolicy":
		var o networkingv1.NetworkPolicy
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			return kind, err
		}
		return kind, networkPolicy(&o)
	case "apps/v1 Deployment":
		var o appsv1.Deployment
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			return kind, err
		}
		return kind, deployment(&o)
	default:
		return kind, fmt.Errorf("not a kind this check knows")
	}
}

func name(field, value string) error {
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", field, value, strings.Join(errs, "; "))
	}
	return nil
}

func service(s *corev1.Service) error {
	if err := name("metadata.name", s.Name); err != nil {
		return err
	}
	if len(s.Spec.Selector) == 0 {
		return fmt.Errorf("spec.selector is empty: the service would select no pod of ours")
	}
	for _, p := range s.Spec.Ports {
		if p.Port < 1 || p.Port > 65535 {
			return fmt.Errorf("spec.ports %q: port %d", p.Name, p.Port)
		}
	}
	return nil
}

// networkPolicy: it must select pods (an empty selector would take in every pod of the
// namespace) and name the ports it lets in.
func networkPolicy(p *networkingv1.NetworkPolicy) error {
	if err := name("metadata.name", p.Name); err != nil {
		return err
	}
	if len(p.Spec.PodSelector.MatchLabels) == 0 && len(p.Spec.PodSelector.MatchExpressions) == 0 {
		return fmt.Errorf("spec.podSelector is empty: the policy would take in every pod of the namespace")
	}
	for i, rule := range p.Spec.Ingress {
		if len(rule.Ports) == 0 {
			return fmt.Errorf("spec.ingress[%d] names no port: it would let in every port", i)
		}
	}
	return nil
}

func deployment(d *appsv1.Deployment) error {
	if err := name("metadata.name", d.Name); err != nil {
		return err
	}
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		return fmt.Errorf("spec.selector.matchLabels is empty")
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			return fmt.Errorf("spec.selector %s=%s does not match the pod template's labels", k, v)
		}
	}
	// Two plain processes on one configuration would each mirror every flow: one replica and no
	// surge, unless the deployment says its pods are workers (strait.workers.enabled), which
	// share the flows and fence each other.
	if d.Annotations["strait.dev/workers"] != "true" {
		if d.Spec.Replicas != nil && *d.Spec.Replicas > 1 {
			return fmt.Errorf("spec.replicas is %d: without workers (annotation strait.dev/workers: \"true\" and strait.workers.enabled in the file) strait runs one replica", *d.Spec.Replicas)
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			return fmt.Errorf("spec.strategy.type is %q: strait needs Recreate (no second pod during an update) unless its pods are workers", d.Spec.Strategy.Type)
		}
	}
	volumes := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 {
			return fmt.Errorf("volume %q: %s", v.Name, strings.Join(errs, "; "))
		}
		volumes[v.Name] = true
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return fmt.Errorf("no containers")
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Image == "" {
			return fmt.Errorf("container %q has no image", c.Name)
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			if errs := validation.IsValidPortName(p.Name); p.Name != "" && len(errs) > 0 {
				return fmt.Errorf("container %q port %q: %s", c.Name, p.Name, strings.Join(errs, "; "))
			}
			ports[p.Name] = true
		}
		for what, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
			if probe == nil || probe.HTTPGet == nil {
				return fmt.Errorf("container %q has no HTTP %s probe", c.Name, what)
			}
			if port := probe.HTTPGet.Port; port.StrVal != "" && !ports[port.StrVal] {
				return fmt.Errorf("container %q %s probe names port %q, which it does not have", c.Name, what, port.StrVal)
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				return fmt.Errorf("container %q mounts volume %q, which the pod does not have", c.Name, m.Name)
			}
		}
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
			return fmt.Errorf("container %q requests no memory", c.Name)
		}
	}
	return nil
}
