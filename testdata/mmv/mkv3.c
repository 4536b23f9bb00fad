/* Produces research_v3.mmv with the real libpcp_mmv 6.0.3 registry API
 * (prototypes declared here: the Debian package ships no headers).
 * Build: gcc -o mkv3 mkv3.c -l:libpcp_mmv.so.1
 * Run:   ./mkv3 /abs/path/research_v3.mmv */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct { unsigned int w; } units_t;	/* pmUnits bit field word */
typedef union { int l; long long ll; double d; char pad[8]; } atom_t;
typedef struct reg reg_t;

extern reg_t *mmv_stats_registry(const char *, int, int);
extern int mmv_stats_add_indom(reg_t *, int, const char *, const char *);
extern int mmv_stats_add_metric(reg_t *, const char *, int, int, int, units_t,
		int, const char *, const char *);
extern int mmv_stats_add_instance(reg_t *, int, int, const char *);
extern int mmv_stats_add_registry_label(reg_t *, const char *, const char *, int, int);
extern int mmv_stats_add_indom_label(reg_t *, int, const char *, const char *, int, int);
extern int mmv_stats_add_metric_label(reg_t *, int, const char *, const char *, int, int);
extern int mmv_stats_add_instance_label(reg_t *, int, int, const char *, const char *, int, int);
extern void *mmv_stats_start(reg_t *);
extern atom_t *mmv_lookup_value_desc(void *, const char *, const char *);
extern void mmv_set_value(void *, atom_t *, double);
extern void mmv_set_string(void *, atom_t *, const char *, int);
extern atom_t *mmv_stats_interval_start(void *, atom_t *, const char *, const char *);

int
main(int argc, char **argv)
{
    units_t none = {0}, count = {0x00100000}, kbyte = {0x10010000}, usec = {0x01001000};
    reg_t *r = mmv_stats_registry(argv[1], 13, 0x1 /* NOPREFIX */);
    void *a;

    mmv_stats_add_indom(r, 2, "shards", "the shard set of the research app");
    mmv_stats_add_instance(r, 2, 100, "alpha");
    mmv_stats_add_instance(r, 2, 200, "beta");
    mmv_stats_add_metric(r, "research3.hits", 1, 3, 1, count, 2, "hits per shard", "hits served by each shard since start");
    mmv_stats_add_metric(r, "research3.name", 2, 6, 4, none, 0, "app name", NULL);
    mmv_stats_add_metric(r, "research3.latency", 3, 9, 1, usec, 2, "busy time", NULL);
    mmv_stats_add_metric(r, "research3.load", 4, 5, 3, none, 0, NULL, NULL);
    mmv_stats_add_metric(r, "research3.small", 5, 0, 3, none, 0, NULL, NULL);
    mmv_stats_add_metric(r, "research3.usmall", 6, 1, 1, kbyte, 2, NULL, NULL);
    mmv_stats_add_metric(r, "research3.big", 7, 2, 3, none, 0, NULL, NULL);
    mmv_stats_add_metric(r, "research3.ratio", 8, 4, 3, none, 0, NULL, NULL);
    mmv_stats_add_registry_label(r, "app", "\"research\"", 1, 0);
    mmv_stats_add_indom_label(r, 2, "shardset", "\"main\"", 1, 0);
    mmv_stats_add_metric_label(r, 1, "unit_hint", "42", 2, 1);
    mmv_stats_add_instance_label(r, 2, 100, "zone", "\"east\"", 1, 0);
    mmv_stats_add_instance_label(r, 2, 200, "primary", "true", 3, 0);
    if ((a = mmv_stats_start(r)) == NULL) {
	perror("mmv_stats_start");
	return 1;
    }
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.hits", "alpha"), 1234);
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.hits", "beta"), 5678);
    mmv_set_string(a, mmv_lookup_value_desc(a, "research3.name", NULL), "research app", 12);
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.latency", "alpha"), 2500);
    /* leave an interval open on beta: extra = -(start time in usec) */
    mmv_stats_interval_start(a, NULL, "research3.latency", "beta");
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.load", NULL), 0.75);
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.small", NULL), -17);
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.usmall", "alpha"), 4096);
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.usmall", "beta"), 8192);
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.big", NULL), -9e9);
    mmv_set_value(a, mmv_lookup_value_desc(a, "research3.ratio", NULL), 0.125);
    return 0;
}
