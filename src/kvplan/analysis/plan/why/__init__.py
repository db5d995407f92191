"""Why a plan came out as it did: ranking, binding resources, rejections, bands, advice."""
