"""The web app: session state, the caches, layout helpers, the chart component, memory. Only this
package (with pages/ and streamlit_app.py) imports Streamlit."""
