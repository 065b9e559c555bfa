/* A stand-in for libnvidia-ml.so.1 with the C signatures NVML documents, for the harness's ctypes
 * reader (sandbox/harness/clock_watch.py). One GPU, found by its UUID or PCI bus id; its clocks,
 * clock-event reasons and violation counters are set from the test through fake_nvml_set().
 * Built with -DOLD_DRIVER it exports only the pre-R535 name nvmlDeviceGetCurrentClocksThrottleReasons.
 * Return codes: NVML_SUCCESS 0, NVML_ERROR_UNINITIALIZED 1, NVML_ERROR_INVALID_ARGUMENT 2,
 * NVML_ERROR_NOT_FOUND 6. */
#include <string.h>

typedef struct { unsigned long long referenceTime; unsigned long long violationTime; } nvmlViolationTime_t;

static int initialised = 0;
static long calls = 0;
static unsigned int sm = 1980, mem = 2619;
static unsigned long long reasons = 0, power_ns = 0, thermal_ns = 0;
static const char *UUID = "GPU-00000000-aaaa-bbbb-cccc-000000000000";
static const char *PCI = "0000:18:00.0";
static char device;  /* the one handle */

void fake_nvml_set(unsigned int s, unsigned int m, unsigned long long r, unsigned long long p, unsigned long long t) {
    sm = s; mem = m; reasons = r; power_ns = p; thermal_ns = t;
}
long fake_nvml_calls(void) { return calls; }

int nvmlInit_v2(void) { initialised = 1; return 0; }

int nvmlDeviceGetHandleByUUID(const char *uuid, void **handle) {
    calls++;
    if (!initialised) return 1;
    if (!uuid || strcmp(uuid, UUID) != 0) return 6;
    *handle = &device;
    return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **handle) {
    calls++;
    if (!initialised) return 1;
    if (!bus || strcmp(bus, PCI) != 0) return 6;
    *handle = &device;
    return 0;
}

int nvmlDeviceGetClockInfo(void *handle, int type, unsigned int *clock) {
    calls++;
    if (handle != &device || !clock) return 2;
    if (type == 1) *clock = sm;        /* NVML_CLOCK_SM */
    else if (type == 2) *clock = mem;  /* NVML_CLOCK_MEM */
    else if (type == 0) *clock = sm;   /* NVML_CLOCK_GRAPHICS */
    else return 2;
    return 0;
}

#ifdef OLD_DRIVER
int nvmlDeviceGetCurrentClocksThrottleReasons(void *handle, unsigned long long *r) {
#else
int nvmlDeviceGetCurrentClocksEventReasons(void *handle, unsigned long long *r) {
#endif
    calls++;
    if (handle != &device || !r) return 2;
    *r = reasons;
    return 0;
}

int nvmlDeviceGetViolationStatus(void *handle, int policy, nvmlViolationTime_t *v) {
    calls++;
    if (handle != &device || !v) return 2;
    v->referenceTime = 0;
    if (policy == 0) v->violationTime = power_ns;        /* NVML_PERF_POLICY_POWER */
    else if (policy == 1) v->violationTime = thermal_ns; /* NVML_PERF_POLICY_THERMAL */
    else return 2;
    return 0;
}
