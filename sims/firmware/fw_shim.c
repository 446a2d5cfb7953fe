/*
 * nvdla-hil: the portability layer NVDLA's firmware (kmd/firmware of the user's nvdla/sw
 * checkout) needs, built with it into one host shared library (harness/loadables/firmware.py).
 *
 * The firmware calls the functions its kmd/include/nvdla_interface.h declares (the Linux KMD
 * implements them in kmd/port/linux/nvdla_core_callbacks.c). Here each one is routed to a
 * callback that Python installs with fw_set_callbacks(): register reads and writes go to the
 * active Transport, descriptor reads and writes and DMA addresses to the loadable's memory as
 * placed in the target's DRAM, and prints to the harness log. The KMD's own sequence
 * (dla_register_driver, dla_execute_task, then dla_isr_handler + dla_process_events after
 * every interrupt until the task completes, dla_clear_task) is driven from Python through the
 * fw_* entry points below. This file is ours; it contains no NVDLA code.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* the firmware's entry points (kmd/include/nvdla_interface.h) */
int32_t dla_register_driver(void **engine_context, void *driver_context);
int32_t dla_isr_handler(void *engine_context);
int32_t dla_process_events(void *engine_context, uint32_t *task_complete);
void dla_clear_task(void *engine_context);
int32_t dla_execute_task(void *engine_context, void *task_data, void *config_data);

/* struct dla_config of kmd/firmware/include/dla_sched.h: four plain fields (a fact of its
 * layout; the firmware reads it through the pointer dla_execute_task is given) */
struct fw_config {
	uint32_t atom_size;
	_Bool bdma_enable;
	_Bool rubik_enable;
	_Bool weight_compress_support;
};

typedef uint32_t (*fw_reg_read_fn)(uint32_t addr);
typedef void (*fw_reg_write_fn)(uint32_t addr, uint32_t value);
/* index: the task's address-list index; returns 0 or a negative errno */
typedef int32_t (*fw_data_fn)(uint64_t index, uint64_t offset, uint32_t size, void *buf);
typedef int32_t (*fw_dma_address_fn)(int32_t index, uint64_t *address);
typedef void (*fw_log_fn)(int32_t level, const char *message);

static fw_reg_read_fn cb_reg_read;
static fw_reg_write_fn cb_reg_write;
static fw_data_fn cb_data_read;
static fw_data_fn cb_data_write;
static fw_dma_address_fn cb_dma_address;
static fw_log_fn cb_log;
static int32_t num_addresses;
static void *engine_context;
static struct fw_config config;
static char driver_context_token;  /* non-NULL driver context the firmware hands back */
static char task_data_token;       /* non-NULL task data (the firmware checks it) */

void fw_set_callbacks(fw_reg_read_fn rr, fw_reg_write_fn rw, fw_data_fn dr, fw_data_fn dw,
		      fw_dma_address_fn da, fw_log_fn log)
{
	cb_reg_read = rr;
	cb_reg_write = rw;
	cb_data_read = dr;
	cb_data_write = dw;
	cb_dma_address = da;
	cb_log = log;
}

/* the KMD's probe: register the engine, clear its task state */
int32_t fw_init(void)
{
	int32_t err = dla_register_driver(&engine_context, &driver_context_token);
	if (err)
		return err;
	dla_clear_task(engine_context);
	return 0;
}

/* the KMD's nvdla_task_submit, first half: hand the task to the firmware */
int32_t fw_execute(int32_t n_addresses, uint32_t atom_size, int32_t bdma, int32_t rubik, int32_t wc)
{
	num_addresses = n_addresses;
	config.atom_size = atom_size;
	config.bdma_enable = bdma != 0;
	config.rubik_enable = rubik != 0;
	config.weight_compress_support = wc != 0;
	return dla_execute_task(engine_context, &task_data_token, &config);
}

/* the KMD's interrupt handler */
int32_t fw_isr(void)
{
	return dla_isr_handler(engine_context);
}

/* the KMD's wait loop, after each interrupt */
int32_t fw_process_events(uint32_t *task_complete)
{
	return dla_process_events(engine_context, task_complete);
}

void fw_clear_task(void)
{
	dla_clear_task(engine_context);
}

/* ---- the portability callbacks the firmware calls ---------------------------------------- */
uint32_t dla_reg_read(void *driver_context, uint32_t addr)
{
	(void)driver_context;
	return cb_reg_read ? cb_reg_read(addr) : 0;
}

void dla_reg_write(void *driver_context, uint32_t addr, uint32_t reg)
{
	(void)driver_context;
	if (cb_reg_write)
		cb_reg_write(addr, reg);
}

int32_t dla_data_read(void *driver_context, void *task_data, uint64_t src, void *dst,
		      uint32_t size, uint64_t offset)
{
	(void)driver_context;
	(void)task_data;
	return cb_data_read ? cb_data_read(src, offset, size, dst) : -22;
}

int32_t dla_data_write(void *driver_context, void *task_data, void *src, uint64_t dst,
		       uint32_t size, uint64_t offset)
{
	(void)driver_context;
	(void)task_data;
	return cb_data_write ? cb_data_write(dst, offset, size, src) : -22;
}

/* DESTINATION_PROCESSOR (0): the "CPU address" is the address-list index itself, as the Linux
 * KMD does; DESTINATION_DMA (1): the address NVDLA sees */
int32_t dla_get_dma_address(void *driver_context, void *task_data, int16_t index, void *dst_ptr,
			    uint32_t destination)
{
	uint64_t *dst = (uint64_t *)dst_ptr;

	(void)driver_context;
	(void)task_data;
	if (index < 0 || index >= num_addresses)
		return -22;
	if (destination == 0) {
		*dst = (uint64_t)index;
		return 0;
	}
	if (destination == 1)
		return cb_dma_address ? cb_dma_address(index, dst) : -22;
	return -22;
}

int64_t dla_get_time_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void fw_vlog(int32_t level, const char *fmt, va_list args)
{
	char buf[1024];

	vsnprintf(buf, sizeof(buf), fmt, args);
	if (cb_log)
		cb_log(level, buf);
}

void dla_debug(const char *str, ...)
{
	va_list args;

	va_start(args, str);
	fw_vlog(0, str, args);
	va_end(args);
}

void dla_info(const char *str, ...)
{
	va_list args;

	va_start(args, str);
	fw_vlog(1, str, args);
	va_end(args);
}

void dla_warn(const char *str, ...)
{
	va_list args;

	va_start(args, str);
	fw_vlog(2, str, args);
	va_end(args);
}

void dla_error(const char *str, ...)
{
	va_list args;

	va_start(args, str);
	fw_vlog(3, str, args);
	va_end(args);
}

void *dla_memset(void *src, int ch, uint64_t len)
{
	return memset(src, ch, (size_t)len);
}

void *dla_memcpy(void *dest, const void *src, uint64_t len)
{
	return memcpy(dest, src, (size_t)len);
}
