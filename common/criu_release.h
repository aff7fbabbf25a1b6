/* Names shared by the shim and its CRIU release plugin (checkpoint/criu_plugin/criu_release_plugin.c, which is C):
 * the plugin's file, the environment variable that tells it the devices to release, and the file it
 * leaves in an image it released files from (its restore then loads the plugin again). */
#ifndef NVPROXY_COMMON_CRIU_RELEASE_H
#define NVPROXY_COMMON_CRIU_RELEASE_H

#define NVPROXY_RELEASE_PLUGIN_FILE "nvproxy_criu_release.so"
#define NVPROXY_RELEASE_ENV "NVPROXY_CRIU_RELEASE"
#define NVPROXY_RELEASED_RECORD_FILE "nvproxy-criu-released"

#endif
