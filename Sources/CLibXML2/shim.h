// libxml2's streaming reader (xmlTextReader), for the Metalink parser, loaded when the first
// document is parsed (`dlopen` of libxml2.so.2), not linked: linking it would load libxml2, ICU
// (libicuuc, 30 MB of libicudata), libstdc++ and libgcc_s at every start of segget, which the
// executable was built to avoid (Package.swift, issue 24), for the few runs that read a Metalink.
// The values below are libxml2's (xmlreader.h, parser.h), unchanged in its ABI since 2.6; the
// functions' prototypes are declared in Swift (XMLLibrary), the reader is opaque. Header-only, no C
// compile unit; Debian's package is libxml2 (libxml2-dev has the headers these follow).
#ifndef SEGGET_CLIBXML2_SHIM_H
#define SEGGET_CLIBXML2_SHIM_H

/// libxml2's xmlTextReaderErrorFunc: the reader's errors go here instead of standard error.
typedef void (*segget_xml_reader_error_func)(void *arg, const char *msg, int severity, void *locator);

// xmlParserOption values (parser.h).
enum {
    SEGGET_XML_PARSE_NOENT = 1 << 1,
    SEGGET_XML_PARSE_DTDLOAD = 1 << 2,
    SEGGET_XML_PARSE_NOERROR = 1 << 5,
    SEGGET_XML_PARSE_NOWARNING = 1 << 6,
    SEGGET_XML_PARSE_NONET = 1 << 11,
    SEGGET_XML_PARSE_NOCDATA = 1 << 14,
};

// xmlReaderTypes values (xmlreader.h).
enum {
    SEGGET_XML_NODE_ELEMENT = 1,
    SEGGET_XML_NODE_TEXT = 3,
    SEGGET_XML_NODE_CDATA = 4,
    SEGGET_XML_NODE_ENTITY_REFERENCE = 5,
    SEGGET_XML_NODE_DOCUMENT_TYPE = 10,
    SEGGET_XML_NODE_SIGNIFICANT_WHITESPACE = 14,
    SEGGET_XML_NODE_END_ELEMENT = 15,
};

#endif
