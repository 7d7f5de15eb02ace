/* nyx_version: the toolkit version, one place. */
#ifndef NYX_VERSION_H
#define NYX_VERSION_H

#define NYX_VERSION "0.1.0"

#endif
