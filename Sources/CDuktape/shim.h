// Debian's libduktape (duktape-dev), for the tern-pac program (Sources/tern-pac).
#include <duktape.h>
