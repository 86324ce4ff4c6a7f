package memcached

// Condition types of a Memcached's status, after the Kubernetes API
// conventions.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
)

// Reason says why a condition has its status: the condition's reason, one
// CamelCase word. The transport's logs and metrics read these values, never
// the words.
type Reason string

// Reasons, by the condition that carries them. ReasonInvalidSpec is every
// condition's when the spec cannot be acted on.
const (
	// Available.
	ReasonEnoughPodsReady    Reason = "EnoughPodsReady"
	ReasonNotEnoughPodsReady Reason = "NotEnoughPodsReady"
	ReasonScaledToZero       Reason = "ScaledToZero"

	// Progressing.
	ReasonDeploymentNotObserved    Reason = "DeploymentNotObserved"
	ReasonDeploymentUpdating       Reason = "DeploymentUpdating"
	ReasonRollingOut               Reason = "RollingOut"
	ReasonRolloutComplete          Reason = "RolloutComplete"
	ReasonProgressDeadlineExceeded Reason = "ProgressDeadlineExceeded"
	// ReasonDeleting: the Memcached is being deleted and children remain;
	// ReasonDeleted: they are gone.
	ReasonDeleting Reason = "Deleting"
	ReasonDeleted  Reason = "Deleted"

	// Degraded. After ReasonChildKindNotManaged come the reasons read from
	// the Pods, worst first (see podTroubles): the check container's
	// refusal (a Secret without a key), then the container states and
	// scheduling condition kubelet and the scheduler report.
	ReasonAsExpected                 Reason = "AsExpected"
	ReasonInvalidSpec                Reason = "InvalidSpec"
	ReasonChildKindNotManaged        Reason = "ChildKindNotManaged"
	ReasonAgentImageUnset            Reason = "AgentImageUnset"
	ReasonSecretNotUsable            Reason = "SecretNotUsable"
	ReasonOOMKilled                  Reason = "OOMKilled"
	ReasonCrashLoopBackOff           Reason = "CrashLoopBackOff"
	ReasonImagePullBackOff           Reason = "ImagePullBackOff"
	ReasonErrImagePull               Reason = "ErrImagePull"
	ReasonCreateContainerConfigError Reason = "CreateContainerConfigError"
	ReasonUnschedulable              Reason = "Unschedulable"
)

// podTroubles are the reasons Degraded reports from the Pods, worst first.
var podTroubles = []Reason{
	ReasonSecretNotUsable, ReasonOOMKilled, ReasonCrashLoopBackOff, ReasonImagePullBackOff, ReasonErrImagePull,
	ReasonCreateContainerConfigError, ReasonUnschedulable,
}
