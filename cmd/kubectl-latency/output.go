package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"latencytier.io/latencytier/api/v1alpha1"
)

// scheme knows our kinds and v1 List, for the printers (apiVersion and
// kind on each object) and the client.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// output is a command's -o: "" (the table), "wide" (the table with more
// columns), or any of kubectl's object formats (json, yaml, name,
// jsonpath=..., go-template=..., with --template), printed by cli-runtime's
// printers.
type output struct {
	format string
	print  *genericclioptions.PrintFlags
	wide   bool // whether the command has a wide table
}

func newOutput(wide bool) *output {
	o := &output{print: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme), wide: wide}
	o.print.OutputFormat = &o.format
	return o
}

// formats lists what -o takes.
func (o *output) formats() []string {
	f := o.print.AllowedFormats()
	if o.wide {
		f = append([]string{"wide"}, f...)
	}
	return f
}

// addFlags adds -o and the printers' own flags (--template,
// --show-managed-fields, --allow-missing-template-keys), and completes -o.
func (o *output) addFlags(cmd *cobra.Command) {
	o.print.JSONYamlPrintFlags.AddFlags(cmd)
	o.print.TemplatePrinterFlags.AddFlags(cmd)
	cmd.Flags().StringVarP(&o.format, "output", "o", "", "Output format. One of: ("+strings.Join(o.formats(), ", ")+").")
	o.print.OutputFlagSpecified = func() bool { return cmd.Flag("output").Changed }
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return o.formats(), cobra.ShellCompDirectiveNoFileComp
	})
}

// table says the command prints its own table (plain or wide).
func (o *output) table() bool {
	tmpl := o.print.TemplatePrinterFlags.TemplateArgument
	return (o.format == "" && (tmpl == nil || *tmpl == "")) || (o.wide && o.format == "wide")
}

// validate fails on a format the printers do not know (or "wide" where
// the command has none), before the command makes any request.
func (o *output) validate() error {
	if o.table() {
		return nil
	}
	if o.format == "wide" {
		return fmt.Errorf("--output wide: this command has no wide table; use one of %s", strings.Join(o.print.AllowedFormats(), ", "))
	}
	if _, err := o.print.ToPrinter(); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return fmt.Errorf("--output %q: not one of %s", o.format, strings.Join(o.formats(), ", "))
		}
		return fmt.Errorf("--output %q: %w", o.format, err)
	}
	return nil
}

// printObject prints obj with the printer -o names; -o name, which takes
// no lists, prints a list's items one by one, as kubectl get does.
func (o *output) printObject(out io.Writer, obj runtime.Object) error {
	p, err := o.print.ToPrinter()
	if err != nil {
		return err
	}
	if o.format != "name" || !meta.IsListType(obj) {
		return p.PrintObj(obj, out)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := p.PrintObj(it, out); err != nil {
			return err
		}
	}
	return nil
}

// list is a v1 List of objs (as kubectl get prints several kinds), each
// with its apiVersion and kind.
func list(objs ...runtime.Object) (*corev1.List, error) {
	l := &corev1.List{}
	for _, obj := range objs {
		obj = obj.DeepCopyObject()
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		l.Items = append(l.Items, runtime.RawExtension{Object: obj})
	}
	return l, nil
}

// isWide says -o wide was asked for.
func (o *output) isWide() bool { return o.wide && o.format == "wide" }
