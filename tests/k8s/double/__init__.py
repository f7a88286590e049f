"""kube-double: a test double of the Kubernetes API server (v1.32) with a
Job controller, a scheduler, a garbage collector and stand-in kubelets that
run containers as local processes. Test code only; see docs/k8s-double.md."""
