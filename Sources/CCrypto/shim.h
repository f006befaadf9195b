// OpenSSL libcrypto's EVP digest interface, imported for the verifier.
#ifndef SEGGET_CCRYPTO_SHIM_H
#define SEGGET_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#endif
